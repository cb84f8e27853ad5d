"""The worker that runs in each pod: ``topology/`` (what users write), ``state/`` (stores,
restore, standbys, snapshots), ``runtime/`` (the processing loop), ``assignment/`` (who runs
which task). Users import the DSL from ``baton``, not from here."""
