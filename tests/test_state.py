"""helpers.state: the table reads live tensors."""

import warnings

import pytest
import torch

from helpers.state import describe_grad, tensor_state


def test_flags_and_grad_fn_are_read_from_tensors():
    x = torch.tensor([1.0, 2.0])
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    y = (w * x).sum()
    table = tensor_state(x=x, w=w, y=y)
    assert table.row("x")["requires_grad"] is False and table.row("x")["is_leaf"] is True
    assert table.row("w")["requires_grad"] is True and table.row("w")["grad"] == "None"
    assert table.row("y")["grad_fn"] == "SumBackward0" and table.row("y")["is_leaf"] is False
    y.backward()
    assert tensor_state(w=w).row("w")["grad"] == "[1, 2]"


def test_reading_grad_of_a_non_leaf_does_not_warn():
    w = torch.ones(2, requires_grad=True)
    h = w * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tensor_state(h=h).row("h")["grad"] == "None"


def test_shared_storage_and_version_counter():
    a = torch.zeros(4)
    b = a.detach()
    c = a.clone()
    b.add_(1)
    table = tensor_state(a=a, b=b, c=c)
    assert table.row("a")["shares storage with"] == "b"
    assert table.row("c")["shares storage with"] == "-"
    assert table.row("a")["version"] == 1  # detach() shares the version counter too


def test_large_grad_is_summarised():
    assert describe_grad(torch.ones(10, 10)) == "shape [10, 10], norm 10"
    assert describe_grad(torch.ones(6)) == "[1, 1, 1, 1, 1, 1]"  # values up to six
    assert describe_grad(torch.ones(7)) == "shape [7], norm 2.646"
    assert describe_grad(None) == "None"


def test_plain_text_and_html_forms():
    table = tensor_state(x=torch.ones(2))
    assert "requires_grad" in repr(table).splitlines()[0]
    assert "<table" in table._repr_html_()


@pytest.mark.parametrize("bad", [None, 3, [1.0], "x"])
def test_non_tensors_are_rejected_by_name(bad):
    with pytest.raises(TypeError, match="x= is a"):
        tensor_state(x=bad)


def test_needs_at_least_one_tensor():
    with pytest.raises(TypeError, match="needs named tensors"):
        tensor_state()


def test_select_keeps_the_name_column_and_rejects_unknown_columns():
    table = tensor_state(x=torch.ones(2), w=torch.ones(2, requires_grad=True)).select("is_leaf")
    assert table.columns == ["tensor", "is_leaf"] and table.row("w")["is_leaf"] is True
    with pytest.raises(KeyError, match="no column"):
        table.select("colour")


def test_a_zero_dim_tensor_is_shown_as_scalar_and_a_leaf_has_no_grad_fn():
    loss = torch.tensor(2.0)
    table = tensor_state(loss=loss, v=torch.zeros(2, 3))
    assert table.row("loss")["shape"] == "scalar"
    assert table.row("v")["shape"] == "[2, 3]"
    assert table.row("loss")["grad_fn"] is None


def test_every_tensor_sharing_a_storage_is_listed():
    a = torch.tensor(2.0)  # one element: a scalar still has a storage to share
    table = tensor_state(a=a, b=a.detach(), c=a.view(1))
    assert table.row("a")["shares storage with"] == "b, c"
    assert table.row("c")["shares storage with"] == "a, b"


def test_empty_tensors_share_no_storage():
    # every empty tensor's storage starts at address 0: not a shared storage
    table = tensor_state(e=torch.empty(0), f=torch.empty(0))
    assert table.column("shares storage with") == ["-", "-"]


def test_a_sparse_tensor_has_no_storage_to_share():
    s = torch.tensor([0.0, 1.0, 0.0]).to_sparse()
    table = tensor_state(s=s, d=torch.zeros(3))
    assert table.row("s")["shares storage with"] == "-"
    assert table.row("s")["shape"] == "[3]"


def test_grad_values_use_lower_case_exponents():
    assert describe_grad(torch.tensor([1e-5, 123456.0])) == "[1e-05, 1.235e+05]"
    assert describe_grad(torch.tensor(0.5)) == "[0.5]"


def test_error_messages_say_how_to_call_it():
    with pytest.raises(TypeError) as empty:
        tensor_state()
    assert str(empty.value) == (
        "tensor_state() needs named tensors, e.g. tensor_state(x=x, loss=loss)"
    )
    with pytest.raises(TypeError) as bad:
        tensor_state(w=[1.0])
    assert str(bad.value) == (
        "tensor_state(): w= is a list, not a tensor; "
        "pass tensors by name, e.g. tensor_state(w=my_tensor)"
    )


def test_a_model_or_a_dict_may_come_first_and_a_wrong_one_is_named():
    model, x = torch.nn.Linear(2, 1), torch.ones(2)
    assert tensor_state(model, x=x).column("tensor") == ["weight", "bias", "x"]
    assert tensor_state({"a": x}).column("tensor") == ["a"]
    with pytest.raises(TypeError) as bad:
        tensor_state("w")
    assert str(bad.value) == (
        "tensor_state()'s first argument is a str; pass a model (nn.Module), a dict of "
        "name -> tensor, or model.named_parameters()"
    )


def test_a_dtype_column_appears_only_when_precision_is_mixed():
    w = torch.ones(2, requires_grad=True)
    (w * 2).sum().backward()
    plain = tensor_state(w=w)
    assert "dtype" not in plain.columns and "dtype" not in plain.rows[0]
    half = w.detach().half()
    mixed = tensor_state(w=w, half=half)
    assert mixed.columns[:3] == ["tensor", "shape", "dtype"]
    assert mixed.row("w")["dtype"] == "float32 (grad float32)"
    assert mixed.row("half")["dtype"] == "float16"
    assert tensor_state(b=w.detach().bfloat16()).row("b")["dtype"] == "bfloat16"
    assert "dtype" not in tensor_state(d=w.detach().double()).columns


def test_in_the_chinese_edition_a_large_grad_is_summarised_in_chinese():
    from helpers.language import set_language

    set_language("zh")
    try:
        assert describe_grad(torch.ones(10, 10)) == "形状 [10, 10]，范数 10"
        assert describe_grad(torch.ones(2)) == "[1, 1]"  # values stay values
    finally:
        set_language("en")
