"""`RunLayout`: every path under `state/<run>/`. Nobody else joins strings into the state directory.

```
state/<run>/
  run.json                      resolved config, hash, code version
  bank/vNNNN/                   immutable bank versions (files: `BankVersionLayout`, bank_layout.py)
  checkpoints/sft/  checkpoints/round_NN/step_NNNNNN/  best.json
  round_NN/                     plan, phase markers, shards, aggregates, route records (`RoundLayout`, round_layout.py)
  heldout/                      evaluation-private; never opened by training phases
  heldout/SECRET                the run's held-out secret (0600): with benchmark.heldout_seed it derives the suite
  heldout/stage_probe/          the held-out stage probe's states and raw rollouts (`StageProbeLayout`)
  stage_probe/<label>.json      the stage probe's aggregate per scored checkpoint
  leases/                       driver leases
  jobs/                         submitit logs
```
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from bat.state.bank_layout import BankVersionLayout
from bat.state.probe_layout import StageProbeLayout
from bat.state.round_layout import DONE_NAME, RoundLayout

FINGERPRINT_META_NAME = "INDEX.json"
FINGERPRINT_ENTRIES_NAME = "entries.jsonl"
TRANSCRIPTS_NAME = "transcripts.jsonl"
"""Held-out transcripts of one evaluation (`heldout/round_NN/[variant/]<split>/`)."""
_BANK_RE = re.compile(r"^v(\d{4})$")


def model_cache_root(configured: str | os.PathLike[str] | None = None) -> Path:
    """Folder of converted named pretrained models, shared by every run of this user: `configured`
    (`model.cache_dir`), else $BAT_MODEL_CACHE, else $XDG_CACHE_HOME/bat/models, else ~/.cache/bat/models."""
    if configured:
        return Path(configured).expanduser().resolve()
    if os.environ.get("BAT_MODEL_CACHE"):
        return Path(os.environ["BAT_MODEL_CACHE"]).expanduser().resolve()
    cache = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (cache / "bat" / "models").resolve()


def user_heldout_secret() -> Path:
    """Held-out secret of standalone benchmark commands run outside a run (`bat benchmark run` without `--state`):
    $XDG_CACHE_HOME/bat/heldout_secret, else ~/.cache/bat/heldout_secret."""
    cache = Path(os.environ["XDG_CACHE_HOME"]) if os.environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (cache / "bat" / "heldout_secret").resolve()


def pretrained_model_dir(name: str, configured: str | os.PathLike[str] | None = None) -> Path:
    """The converted folder of the named pretrained model `name` in the model cache."""
    return model_cache_root(configured) / name


DEFAULT_STATE_ROOT = Path("state")
"""Where runs live when no --state is given: `state/<run.name>` under the working directory."""


@dataclass(frozen=True)
class RunLayout:
    """Paths of one run's state directory. `root` is `state/<run>`."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())

    @classmethod
    def of(cls, state: str | os.PathLike[str] | None, run_name: str) -> RunLayout:
        """The layout at `state` when given (a `--state` flag), else the default `state/<run_name>`."""
        return cls(Path(state) if state else DEFAULT_STATE_ROOT / run_name)

    # run level -----------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def events_log(self) -> Path:
        return self.root / "events.log"

    @property
    def tensorboard_dir(self) -> Path:
        """TensorBoard event files of the run (rewritten from the metrics and aggregates at every round report)."""
        return self.root / "tensorboard"

    @property
    def leases_dir(self) -> Path:
        return self.root / "leases"

    def lease(self, name: str) -> Path:
        return self.leases_dir / f"{name}.lease.json"

    @property
    def jobs_dir(self) -> Path:
        """submitit folder (job logs, pickles)."""
        return self.root / "jobs"

    @property
    def container_exec(self) -> Path:
        """Host-side wrapper of containerised phase jobs (`bat.orchestrate.container_exec`): runs `apptainer exec`
        and relays the phase's Slurm commands; under the state dir so its path is the same inside the container."""
        return self.jobs_dir / "container_exec.sh"

    @property
    def scratch_dir(self) -> Path:
        return self.root / "scratch"

    def phase_scratch(self, round_index: int, phase: str) -> Path:
        """Disposable work folders of one phase (`scratch/round_NN/<phase>`): sandbox workspaces, state copies."""
        return self.scratch_dir / f"round_{round_index:02d}" / phase

    def bank_scratch(self, name: str) -> Path:
        """Disposable build folder of a bank synthesis (`scratch/bank-<name>`)."""
        return self.scratch_dir / f"bank-{name}"

    @property
    def models_dir(self) -> Path:
        """Locally built base models (e.g. the tiny model)."""
        return self.root / "models"

    def base_model(self, name: str = "tiny") -> Path:
        return self.models_dir / name

    # bank ------------------------------------------------------------------
    @property
    def bank_root(self) -> Path:
        return self.root / "bank"

    def bank(self, version: int) -> Path:
        if version < 1:
            raise ValueError(f"bank versions start at 1, got {version}")
        return self.bank_root / f"v{version:04d}"

    def bank_versions(self) -> list[int]:
        """Versions present on disk (admitted or not), ascending."""
        if not self.bank_root.is_dir():
            return []
        found = (_BANK_RE.match(p.name) for p in self.bank_root.iterdir() if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def bank_version(self, version: int) -> BankVersionLayout:
        """The files of bank version `version` (manifest, rows, states, scan verdict)."""
        return BankVersionLayout(self.bank(version))

    def complete_bank_versions(self) -> list[int]:
        """Versions whose synthesis finished (MANIFEST.json present), ascending."""
        return [v for v in self.bank_versions() if self.bank_version(v).is_complete()]

    def admitted_bank_versions(self) -> list[int]:
        return [v for v in self.bank_versions() if self.bank_version(v).is_admitted()]

    def newest_admitted_bank(self) -> int | None:
        admitted = self.admitted_bank_versions()
        return admitted[-1] if admitted else None

    # checkpoints -------------------------------------------------------------
    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def sft_checkpoints(self) -> Path:
        return self.checkpoints_dir / "sft"

    def round_checkpoints(self, round_index: int) -> Path:
        return self.checkpoints_dir / f"round_{round_index:02d}"

    @property
    def best_json(self) -> Path:
        return self.checkpoints_dir / "best.json"

    def candidate_model(self, round_index: int) -> Path:
        """HF-format export evaluated in round `round_index`: the SFT export in round 0, else the GRPO candidate."""
        if round_index == 0:
            return self.sft_checkpoints / "export"
        return self.round_checkpoints(round_index) / "export"

    # rounds ----------------------------------------------------------------
    def round_dir(self, round_index: int) -> Path:
        if round_index < 0:
            raise ValueError(f"round index must be >= 0, got {round_index}")
        return self.root / f"round_{round_index:02d}"

    def round(self, round_index: int) -> RoundLayout:
        """The files of round `round_index` (plan, phase markers, shards, aggregates, route records, report)."""
        return RoundLayout(self.round_dir(round_index), round_index)

    def rounds(self) -> list[int]:
        found = (re.match(r"^round_(\d+)$", p.name) for p in self.root.glob("round_*") if p.is_dir())
        return sorted(int(m.group(1)) for m in found if m)

    def plan(self, round_index: int) -> Path:
        return self.round(round_index).plan

    def phase_dir(self, round_index: int, phase: str) -> Path:
        return self.round_dir(round_index) / phase

    def training_metrics(self, round_index: int, phase: str) -> Path:
        """`round_NN/<phase>/metrics.jsonl`: one line per optimizer step of a training phase (sft, grpo)."""
        return self.round(round_index).metrics(phase)

    def done_marker(self, round_index: int, phase: str) -> Path:
        return self.phase_dir(round_index, phase) / DONE_NAME

    def report_md(self, round_index: int) -> Path:
        return self.round(round_index).report_md

    def report_json(self, round_index: int) -> Path:
        return self.round(round_index).report_json

    def round_events(self, round_index: int) -> Path:
        return self.round(round_index).events

    # held-out side -----------------------------------------------------------
    @property
    def heldout_dir(self) -> Path:
        """Evaluation-private side: raw held-out runs. Training phases must never open it."""
        return self.root / "heldout"

    @property
    def heldout_secret(self) -> Path:
        """The run's held-out secret (`heldout/SECRET`, mode 0600): with `benchmark.heldout_seed` it derives every
        held-out instance. Only the evaluation and the fingerprint export read it; it is never mounted into a sandbox."""
        return self.heldout_dir / "SECRET"

    def heldout_runs(self, round_index: int, split: str = "controller", variant: str | None = None) -> Path:
        """`heldout/round_NN/<split>`, or `heldout/round_NN/<variant>/<split>` for a variant (the base policy)."""
        base = self.heldout_dir / f"round_{round_index:02d}"
        return (base / variant / split) if variant else (base / split)

    def heldout_run_records(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """Raw held-out run records of one evaluation (`runs.jsonl`, kept when `evaluate.keep_raw_runs`)."""
        return self.heldout_runs(round_index, split, variant) / "runs.jsonl"

    def heldout_manifest(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """What one evaluation ran (instances, checkpoint digest, config) on the held-out side."""
        return self.heldout_runs(round_index, split, variant) / "manifest.json"

    def heldout_partial(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """Runs finished so far by an evaluation (appended one by one) so an interrupted one resumes."""
        return self.heldout_runs(round_index, split, variant) / "partial.jsonl"

    def heldout_transcripts(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """Every run's transcript with its failure breakdown (`transcripts.jsonl`, kept when
        `evaluate.keep_transcripts`); read by `bat evaluate explain`, never by a training phase."""
        return self.heldout_runs(round_index, split, variant) / TRANSCRIPTS_NAME

    def heldout_partial_transcripts(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """Transcripts of the runs finished so far (appended beside `partial.jsonl`)."""
        return self.heldout_runs(round_index, split, variant) / "partial_transcripts.jsonl"

    def heldout_work(self, round_index: int, split: str, variant: str | None = None) -> Path:
        """Disposable workspaces of one evaluation's runs (removed when it finishes)."""
        return self.heldout_runs(round_index, split, variant) / "work"

    @property
    def stage_probe(self) -> StageProbeLayout:
        """The held-out stage probe: states and raw rollouts under `heldout/stage_probe/`, aggregates under
        `stage_probe/`."""
        return StageProbeLayout(self.heldout_dir / "stage_probe", self.root / "stage_probe")

    @property
    def test_split_used(self) -> Path:
        """Marker of the one allowed use of the untouched test split (`heldout/test_split_used.json`)."""
        return self.heldout_dir / "test_split_used.json"

    # orchestration: submitit folders and job records ---------------------------
    def submitit_dir(self, round_index: int, phase: str) -> Path:
        """submitit folder of one phase's jobs (pickles, stdout/stderr per job id)."""
        return self.jobs_dir / f"round_{round_index:02d}" / phase

    def job_record(self, round_index: int, phase: str) -> Path:
        """JSON record of the job last queued for a phase (job id, executor, owner)."""
        return self.jobs_dir / f"round_{round_index:02d}" / f"{phase}.job.json"

    # leakage preflight: the held-out fingerprint index -------------------------
    @property
    def fingerprint_index(self) -> Path:
        """Held-out fingerprint index exported by the held-out side (ids, paths, answers, text n-grams);
        the only held-out product the training side (scan phase) reads."""
        return self.root / "fingerprints"

    @property
    def fingerprint_meta(self) -> Path:
        """The index's metadata (`fingerprints/INDEX.json`: digest, counts, the secret's fingerprint)."""
        return self.fingerprint_index / FINGERPRINT_META_NAME

    @property
    def fingerprint_entries(self) -> Path:
        return self.fingerprint_index / FINGERPRINT_ENTRIES_NAME

    def ensure(self) -> RunLayout:
        """Create the run root and the fixed top-level folders."""
        for path in (self.root, self.bank_root, self.checkpoints_dir, self.heldout_dir, self.leases_dir):
            path.mkdir(parents=True, exist_ok=True)
        return self
