"""What a learner pokes: the explorers' widgets, what they compute, their pictures, the stepper.

widgets            graph_explorer, backward_stepper, optimizer_lab: thin ipywidgets
explorers          what the graph explorer and the optimizer lab compute (pytest calls it)
backward_recorder  a backward pass recorded node by node: the stepper's frames
widget_pictures    the widgets' HTML panes and static SVG snapshots
live               a widget and its static picture as one output (the quiz uses it too)
"""
