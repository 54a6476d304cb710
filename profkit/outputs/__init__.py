"""The files profkit writes for FlashInfer, the engines and people, each written one way.

- :mod:`profkit.outputs.atomic`: the one writer every output goes through (temporary file in the
  same folder, fsync, rename; never through a planted symlink, never over an input).
- :mod:`profkit.outputs.flashinfer_cache`: the FlashInfer cache file ``profkit repair`` writes.
- :mod:`profkit.outputs.engine_plans`: ``profkit advise``'s plan in FlashInfer's and the engines'
  switches (``plan.py``, ``blocklist.json``, ``sglang_flags.txt``, ``vllm_env.sh``, ``plan.md``).
- :mod:`profkit.outputs.markdown`: Markdown that carries no raw HTML and no unsafe link.

Files FlashInfer or an engine reads are written here and nowhere else (never by ``views/``);
values from captures reach them only as data of the file's language (JSON strings, Python
literals, quoted shell words), and a name a file cannot carry is refused.
"""
