"""The ``swe_agent`` importer: a ``.traj`` (with a RetryAgent's attempts) as sessions, one per
agent, with the task and outcome its sidecar files give."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from ...errors import InputError
from ...records import Session
from .._agent_messages import as_id
from .._swebench import Verdict, looks_like_instance_id, verdict_near
from .._text import clip
from ..base import ImportContext, Importer, as_dict, as_list, dig, head_text, load_json, register, str_or_none
from .layouts import messages_by_agent
from .sidecars import Prediction, args_yaml_model, classic_model, model_from_run_name, read_predictions, replay_config
from .submission import mark_submission


@register
class SweAgent(Importer):
    """SWE-agent trajectories: one session per agent of the traj (and per RetryAgent attempt)."""

    name = "swe_agent"
    description = "SWE-agent .traj trajectories (classic v0.x and 1.x: history[] / trajectory[])"
    extensions = (".traj",)
    priority = 20

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if not text.startswith("{") or '"trajectory_format"' in text or '"mini_version"' in text:
            return False
        if path.name.endswith(".traj"):
            return any(k in text for k in ('"history"', '"trajectory"', '"info"'))
        if '"trajectory"' in text and '"observation"' in text and '"action"' in text:
            return '"thought"' in text or '"response"' in text
        return '"history"' in text and '"message_type"' in text and '"agent"' in text

    def sidecars(self, path: Path) -> list[Path]:
        if path.is_dir():
            return []
        out = []
        pred = read_predictions(path)
        if pred.source:
            out.append(pred.source)
        if (path.parent / "args.yaml").is_file():
            out.append(path.parent / "args.yaml")
        verdict = verdict_near(path, self._instance_id(path, pred))
        if verdict:
            out.append(verdict.source)
        return out

    @staticmethod
    def _stem(path: Path) -> str:
        return path.name[: -len(".traj")] if path.name.endswith(".traj") else path.stem

    def _instance_id(self, path: Path, pred: Prediction, replay: dict | None = None) -> str | None:
        stem = self._stem(path)
        return (as_id(dig(replay, "problem_statement", "id")) if replay else None) or pred.instance_id or (
            stem if looks_like_instance_id(stem) else None)

    def parse(self, path: Path, ctx: ImportContext) -> Iterator[Session]:
        data = load_json(path, ctx)
        if not isinstance(data, dict):
            raise InputError("a SWE-agent .traj must be a JSON object", where=str(path),
                             hint="expected {history: [...], trajectory: [...], info: {...}}")
        attempts = as_list(data.get("attempts"))
        if not any(isinstance(data.get(k), list) for k in ("history", "trajectory")) and not attempts:
            raise InputError("not a SWE-agent trajectory: no history[] or trajectory[]", where=str(path),
                             hint="force another format with --format")
        replay = replay_config(data.get("replay_config"))
        pred = read_predictions(path)
        stem = self._stem(path)
        instance_id = self._instance_id(path, pred, replay)
        verdict = verdict_near(path, instance_id)
        if verdict and verdict.task and not instance_id:
            instance_id = verdict.task
        model = str_or_none(dig(replay, "agent", "model", "name"))
        shortcut = None
        if model is None:  # a classic run: the name it was run with, maybe one of SWE-agent's shortcuts
            named = args_yaml_model(path) or model_from_run_name(pred.model) or model_from_run_name(path.parent.name)
            model = classic_model(named)
            shortcut = named if model != named else None
        ext = instance_id or stem
        outcome = verdict.outcome if verdict else "unknown"

        if isinstance(data.get("history"), list) or isinstance(data.get("trajectory"), list):
            best = dig(data, "info", "best_attempt_idx")
            yield from self._sessions(data, ctx, ext=ext, model=model, task=instance_id, outcome=outcome,
                                      replay=replay, verdict=verdict, attempts=len(attempts), shortcut=shortcut)
            for i, attempt in enumerate(attempts):
                if i == best or not isinstance(attempt, dict):
                    continue
                yield from self._sessions(attempt, ctx, ext=f"{ext}#attempt{i}", model=model, task=instance_id,
                                          outcome="unknown", replay=replay_config(attempt.get("replay_config"))
                                          or replay, verdict=None, attempts=0, parent=ext, attempt=i,
                                          shortcut=shortcut)
        else:
            for i, attempt in enumerate(attempts):
                if isinstance(attempt, dict):
                    yield from self._sessions(attempt, ctx, ext=f"{ext}#attempt{i}", model=model,
                                              task=instance_id, outcome="unknown", replay=replay, verdict=None,
                                              attempts=0, parent=None, attempt=i, shortcut=shortcut)

    def _sessions(
        self,
        data: dict,
        ctx: ImportContext,
        *,
        ext: str,
        model: str | None,
        task: str | None,
        outcome: str,
        replay: dict,
        verdict: Verdict | None,
        attempts: int,
        parent: str | None = None,
        attempt: int | None = None,
        shortcut: str | None = None,
    ) -> Iterator[Session]:
        info = as_dict(data.get("info"))
        history = data.get("history")
        steps = as_list(data.get("trajectory"))
        by_agent, main_agent, source = messages_by_agent(history, steps, ctx)
        meta: dict[str, Any] = {"source": source, "steps": len(steps)}
        for key in ("exit_status", "swe_agent_version", "swe_agent_hash", "swe_rex_version"):
            if info.get(key) is not None:
                meta[key] = info[key]
        if isinstance(info.get("model_stats"), dict):
            meta["model_stats"] = info["model_stats"]
        if shortcut:  # the name the run was given; ``model`` is what SWE-agent called for it
            meta["model_shortcut"] = shortcut
        submission = info.get("submission")
        if isinstance(submission, str):
            meta["submission_chars"] = len(submission)
            meta["submission"] = clip(submission, 8000)
        if data.get("environment") is not None:
            meta["environment"] = data["environment"]
        processors = dig(replay, "agent", "history_processors") or dig(replay, "agent", "history_processor")
        if processors:
            meta["history_processors"] = processors
        if steps and isinstance(steps[-1], dict) and isinstance(steps[-1].get("query"), list):
            meta["steps_have_query"] = True
        if attempts:
            meta["attempts"] = attempts
            if info.get("best_attempt_idx") is not None:
                meta["best_attempt_idx"] = info["best_attempt_idx"]
        if attempt is not None:
            meta["attempt"] = attempt
        if verdict:
            meta["verdict_source"] = verdict.source.name
        if by_agent.get(main_agent):
            mark_submission(by_agent[main_agent], steps, info)
        demos = sum(1 for m in by_agent.get(main_agent, []) if m.meta.get("is_demo"))
        if demos:
            meta["demo_messages"] = demos
        for agent, msgs in by_agent.items():
            is_main = agent == main_agent
            smeta = dict(meta) if is_main else {"source": source}
            if agent:  # the trajectory's own name for this agent ("main", "primary"), not the tool
                smeta["agent_role"] = agent
            yield Session(
                external_id=ext if is_main else f"{ext}:{agent}",
                format=self.name,
                messages=msgs,
                title=task or ext,
                model=model,
                task=task,
                outcome=outcome if is_main else "unknown",
                parent_external_id=parent if is_main else ext,
                metadata=smeta,
            )
