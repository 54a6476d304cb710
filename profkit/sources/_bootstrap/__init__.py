"""Start-up files for ``profkit capture``; this folder goes on PYTHONPATH, it is not imported.

``sitecustomize.py`` runs at interpreter start-up in every Python process that has this folder on
its path, chains to the sitecustomize it shadows, and (when ``PROFKIT_CAPTURE`` is set) lets
``_profkit_boot`` watch for FlashInfer's import. See :mod:`profkit.sources.autocapture`.
"""
