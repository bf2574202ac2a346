"""Delivery: every line cafleet types into a pane, and how it knows the agent took it.

One pipeline, one module per step (docs/runtime.md §4, §4.9; docs/architecture.md §1):

- `policy`: the per-agent input policies and every delivery constant, defined once;
- `screens`: what an agent's pane shows (the per-agent cues and the classifier);
- `gate`: whether a line may be typed now (type, hold, dismiss);
- `submit`: emptying the composer and the verified submit;
- `keys`: the one typing path (lock, recheck, probe, gate, type, verify, record);
- `drains`: the notification line and the recipient, broadcast and fleet drains.

Importing the package imports nothing: short commands pay only for the step they use
(docs/cli.md §1.8).
"""
