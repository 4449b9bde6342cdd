"""The experiment: curated vs raw mixtures of one raw pool, trained alike, compared on held-out
loss and on transfer to a downstream task, over several seeds.

This package holds what needs no Prefect (torch only through the trainer, imported by the runs
that train or score a model: ``runs``); ``flows.experiment`` runs it, a task per run.

Modules:

    config      ExperimentConfig and its parts (variants, eval_sets, decontamination, task and
                finetune, memorization, languages, efficiency, tokenizer), load_experiment,
                parse_experiment, budget_label, the curation run config of a variant (curation_config)
    heldout     the held-out sets (read_eval_set, heldout_texts) and their evaluation folder
                (write_eval_folder), heldout_provenance, the tokenizer's sample, what a variant
                trained on (trained_on, canary_views), protected_texts, contamination_total
    downstream  the demo's BBC News topic task (the task file's format, its splits and
                subsets are pipeline.formats.task)
    statistics  spread over seeds, compare (Student's t paired by seed, Welch's t otherwise), the
                paired bootstrap, Holm's correction, the sentence a comparison supports; the power
                law of loss against tokens (fit_power_law, tokens_to_reach)
    results     each run's metrics (held-out, transfer, memorization, languages), data_efficiency,
                the families of comparisons, results.json (summarize)
    prepare     what every run starts from, step by step: the corpus, held-out sets, task, quality
                model and canaries (gather_inputs), the curation configs, the pool's tokenizer, the
                evaluation folder, the protected texts, the contamination check (check_mixtures,
                ContaminationError), Prepared
    runs        one run as a task runs it: train_config, pretrain, transfer, measure_memorization,
                score_documents
    collect     what the runs left gathered into results.json: curation summaries, curves, the
                canaries' header (experiment_results, save_results)
    mixfit      the mixture search's mathematics: its constraints, the mixtures it draws, the
                regression families (trees, the mixing law, log-linear), cross-validation and the
                proposal with its bootstrap intervals
    mixsearch   the mixture search's proxies (named by the hash of what they are made of), its
                targets, the validation runs, their comparisons and results.json

Variants. Each variant names the document stages it runs after ``source`` (any of lang, filter,
dedup, lines; ``quality`` adds the fastText quality filter) and how its training mixture is
weighted. Variants with the same stages are one curation run with one mixture each (a mixing
variant such as T = 1 vs T = 3.3 costs no extra curation). Every variant is tokenized with one
neutral tokenizer, trained on a seeded sample of the raw pool (the source stage's documents, the
held-out texts left out), and mixed to the same token budget, which is also what the trainer
trains on.

Held-out sets, fixed before any variant exists and stored raw (no curation step chose or rewrote
them): with ``demo`` the demo corpus's ``heldout/texts.parquet`` (news, dialogues, web pages, and
a junk set reported on its own), plus the user's own ``[[eval_sets]]``. Columns
(``heldout.HELDOUT_COLUMNS``): ``id, text, set, group, lang, kind, clean``. They and the downstream
task's texts are excluded from every pool by ``mix.exclude`` (by id, by near-duplicate, by shared
token windows), then every training mixture is checked for shared 13-token windows. They are
tokenized once into one evaluation folder (mixture format, validation shards only, one group
``<set>/<group>`` per set and source), which the trainer evaluates; bits per byte are reported per
group, per set, and as a headline macro-average over the clean sets (junk apart).
"""
