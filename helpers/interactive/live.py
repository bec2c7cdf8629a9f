"""A widget and a static picture of it, as one output: the base of every explorer and quiz.

A frontend with a running kernel (JupyterLab, Colab) shows the live widget; a viewer that cannot
render widgets shows the picture; nbval compares the text (`helpers.interactive.widgets` says
more). `WidgetFactory` makes widgets that share one layout and style model, so that a notebook's
saved widget state stays small.
"""

from __future__ import annotations

from typing import Any

from helpers.graph import svg_titled
from helpers.language import say

__all__ = ["VIEW_MIME", "LiveWidget", "WidgetFactory", "hint", "ipywidgets_module"]

VIEW_MIME = "application/vnd.jupyter.widget-view+json"


def hint() -> str:
    """The line above a widget's static snapshot, in the learner's language."""
    return say("common", "widgets.hint")


class LiveWidget:
    """A widget plus a static snapshot of its initial state, displayed as one output.

    The bundle holds the widget view (what Jupyter renders live), `image/svg+xml` and/or
    `text/html` (what static viewers render instead) and `text/plain` (compared by nbval).
    """

    def __init__(
        self,
        widget: Any,
        *,
        text: str,
        svg: str | None = None,
        html_fallback: str | None = None,
    ) -> None:
        self.widget = widget
        self.snapshot_text = text
        self.snapshot_svg = svg
        self.snapshot_html = html_fallback

    def __repr__(self) -> str:
        return self.snapshot_text

    def _repr_mimebundle_(self, include=None, exclude=None, **_) -> dict[str, Any]:
        bundle: dict[str, Any] = {
            VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": self.widget.model_id},
            "text/plain": self.snapshot_text,
        }
        if self.snapshot_svg is not None:
            bundle["image/svg+xml"] = svg_titled(self.snapshot_svg, self.snapshot_text)
        if self.snapshot_html is not None:
            bundle["text/html"] = self.snapshot_html
        return bundle


def ipywidgets_module() -> Any:
    """ipywidgets, imported on first use."""
    import ipywidgets  # imported on first use: `import helpers` stays light

    return ipywidgets


class WidgetFactory:
    """Makes widgets that share one default Layout and one style model per widget class.

    A notebook saves the state of every widget model; by default each widget brings its own
    Layout and style model (about 1 KB each). Sharing them keeps the saved state small.
    """

    def __init__(self) -> None:
        w = ipywidgets_module()
        self.layout = w.Layout()
        self.styles: dict[type, Any] = {}
        self._row_layout: Any = None
        self._checkbox_layout: Any = None

    def __call__(self, name: str, layout: Any = None, **kwargs: Any) -> Any:
        """A new ipywidgets.<name>(**kwargs) with the shared layout and style when not given."""
        cls = getattr(ipywidgets_module(), name)
        kwargs["layout"] = layout if layout is not None else self.layout
        if "style" not in kwargs and cls in self.styles:
            kwargs["style"] = self.styles[cls]
        widget = cls(**kwargs)
        if getattr(widget, "style", None) is not None:
            self.styles.setdefault(cls, widget.style)
        return widget

    @staticmethod
    def new_layout(**kwargs: Any) -> Any:
        """A Layout of its own, e.g. new_layout(width="80px"), to share among a few widgets."""
        return ipywidgets_module().Layout(**kwargs)

    def row(self, children: list[Any]) -> Any:
        """An HBox that wraps its children onto the next line when the notebook is narrow."""
        if self._row_layout is None:
            self._row_layout = self.new_layout(
                flex_flow="row wrap", align_items="flex-start", grid_gap="12px"
            )
        return self("HBox", children=children, layout=self._row_layout)

    def checkbox(self, description: str, value: bool) -> Any:
        """A checkbox whose whole description shows (no indent, natural width)."""
        if self._checkbox_layout is None:
            self._checkbox_layout = self.new_layout(width="auto", margin="0 18px 0 0")
        cls = ipywidgets_module().Checkbox
        style = self.styles.get(cls, {"description_width": "initial"})
        return self(
            "Checkbox",
            value=value,
            description=description,
            indent=False,
            style=style,
            layout=self._checkbox_layout,
        )
