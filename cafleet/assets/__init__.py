"""`cafleet setup`'s assets half (docs/cli.md §3.2, docs/runtime.md §7.4): the bundled skills and agent
presets, where each coding agent reads them, and how they are installed.

- `targets`: each agent's resolved identity path (its configuration directory) and its source;
- `bundle`: the files cafleet installs there, rendered for this version;
- `install`: atomic installation that touches only cafleet's own files;
- `setup`: the assets half (install, then record `asset_installs`);
- `guard`: the stale-assets guard every command that spawns or addresses agents runs;
- `status`: doctor's coding-agents rows; `permissions`: doctor's member-permissions rows.

Importing `targets` costs nothing beyond the standard library: the stale-assets guard uses it on
every guarded command.
"""
