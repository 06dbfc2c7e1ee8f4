"""How report.json is laid out, field by field: docs/report-schema.md, kept here so that a
test can hold the two together."""

from __future__ import annotations

REPORT_SCHEMA_DOC = """\
`report.json` (schema_version 2) is written next to the plans of a run, with `report.md`.
Paths are relative to the directory that holds the report unless said otherwise; times
are ISO 8601; costs are estimates at list price in USD, `null` when the model's price is
unknown.

Top level:

- `schema_version`: 2 (2 added `synthesis` and `recommended`, and counts the
  recommended plan's tokens and cost in `totals`); a change that breaks readers increments it.
- `run`: the run's random name.
- `out_dir`: the directory holding the plans and the report (absolute, as given).
- `requirements`: the requirements the plans answer, in full.
- `repository`: the workspace that was planned against.
- `git_head`: the workspace's git HEAD commit, or `null` outside git.
- `started_at`, `finished_at`: when the run started and finished.
- `wall_seconds`: the run's elapsed time (plans run concurrently).
- `exit_code`: the exit code of `planrun plan`.
- `status`: the most serious of: `workspace_changed` when the workspace changed during
  the run, whatever the plans did; `interrupted` when a signal (Ctrl-C, SIGTERM) stopped
  the run; `budget` when the cost budget stopped a plan; `plan_failed` when a plan
  failed or is incomplete (or no plan ran);
  `plan_invalid` when every plan completed but one or more did not pass validation;
  otherwise `ok` (every plan complete and valid, exit code 0). The synthesis never
  changes `status` or `exit_code`: how it went is in `synthesis` and `recommended`.
- `workspace_unchanged`: whether the workspace was left as it was, as far as it was
  checked (see `workspace_check`).
- `workspace_problem`: what changed in the workspace, `""` when nothing did.
- `agent_override`: which user or project file replaced the built-in agent the plans
  ran with (its prompt, tools or model), or `null`.
- `plan_commands`: what the plans' commands could do: `read-only` (only commands that
  read ran) or `scratch` (any command ran, its writes going to a throw-away layer over the
  repository; `--scratch`).
- `budget`: the run's cost caps, `max_cost_usd` (the whole run) and
  `max_cost_usd_per_plan` (each plan, the synthesis included), each `null` when unset, and
  `reached`: whether a plan was stopped by one (see the plans with status `budget`).
- `workspace_check`: what was compared before and after the run: `full` (the file tree
  and `git status`; outside git, the file tree is all there is), `files_only` (the file
  tree only: `git status` could not run, took too long, or the run was interrupted),
  `git_status_only` (the walk of the files took too long) or `none` (nothing could be
  compared).
- `workspace_check_note`: what could not be compared and why (e.g. "`git status` was not
  compared: it took over 180 s before the run"), `""` when everything was.
- `workspace_changed_paths`: when the workspace changed, the first 20 changed paths,
  each with how it changed, e.g. `src/app.py (modified)`, `.git/index (modified)`,
  `notes.txt (added)`; the contents of an added or removed directory are not listed
  apart from it. Empty when nothing changed.
- `workspace_changed_more`: how many more paths changed than are listed.
- `workspace_check_ms`: how long each part of the check took, in milliseconds:
  `before_files` and `after_files` (the walks of the file tree), `before_git_status` and
  `after_git_status` (`git status` in a sandbox of its own); `null` for a part that did
  not run. The parts before run beside the plans' first model calls.
- `synthesis`: the step that merges the valid plans into one recommended plan:
  - `state`: `ran` (see `recommended` for how it ended), `off` (turned off by
    `--no-synthesis` or `synthesis: false`, or `--replay` holds no recorded synthesis) or
    `skipped` (a single plan, fewer than two valid plans, or the run was interrupted
    or its cost budget spent before it started);
  - `note`: why it did not run, `""` when it ran;
  - `agent_override`: which user or project file replaced the built-in Synthesis agent,
    or `null`.
- `recommended`: the recommended plan (`recommended.md`) when the synthesis ran, else
  `null`. It has the fields of a plan (below; `perspective` is `null`, its `status` and
  `valid` say whether the synthesis succeeded; a failed synthesis has `status`
  `failed` and a `reason`), and:
  - `sources`: the labels of the plans it merged;
  - `decisions`: the first 12 points of its Decisions section (each major decision and
    the perspective it came from);
  - `conflicts`: the first 12 points of its Conflicts section (each conflict between the
    plans and how it was resolved).
- `plans`: one object per perspective, described below.
- `critical_files`: the critical files across plans:
  - `matrix`: one `{"path", "named_by": [labels], "count"}` per file any plan names,
    most-named first, then by path;
  - `shared_by_all`: the paths every plan that names critical files names;
  - `first_choices`: `{label: path}`, each plan's first critical file;
  - `agree_on_first`: whether all those first choices are the same file.
- `disagreements`: where the plans differ:
  - `approach`: `{label: text}`, the first ~300 characters of each plan's Approach section;
  - `risks`: `{label: [text]}`, the first 5 points of each plan's Risks section;
  - `unique_files`: `{label: [paths]}`, the critical files no other plan names.
- `failures`: one `{"label", "perspective", "status", "reason", "problems"}` per plan
  that failed, is incomplete, or did not pass validation (the recommended plan is not
  one of them: see `recommended`).
- `totals`: `tokens` (summed, same keys as a plan's), `cost_usd` (the sum of the known
  costs, `null` if none is known) and `cost_complete` (every cost is known), each
  counting the recommended plan too; and the number of `plans` (perspectives), of
  `complete` ones and of `valid` ones.

Each plan:

- `perspective`: the point of view it was planned from, or `null`.
- `label`: its file-name-safe name, unique in the run; the key of the maps above.
- `agent`, `model`: the subagent and the model id that wrote it.
- `status`: `complete`, `incomplete`, `failed` or `budget` (the cost budget stopped it
  at a model call boundary; the plan it had written so far is kept, and it is resumable).
- `valid`: complete and passed validation (sections, 3-5 critical files that exist).
- `reason`: why the run ended as it did (`""` when there is nothing to say).
- `plan_file`: the plan, or `null` when none was written.
- `transcript`: the agent's transcript (JSON lines), or `null`.
- `title`, `summary`: the plan's title (or `null`) and its first paragraph.
- `problems`: what validation found wrong.
- `critical_files`: `{"path", "reason", "exists", "line"}`, path relative to the
  repository; `line` is the line reference written after it (`12`, `12-30`), or `null`.
- `suggested_commands`: commands the plan asks a human to run.
- `proposed_patches`: edits of repository files the agent was refused while planning,
  kept instead of applied: `{"file", "diff", "tool", "reason"}` (`file` relative to the
  repository; `diff` a unified diff against the file as it was; `tool` `Write` or `Edit`;
  `reason` the refusal). At most 20 per plan and 64,000 characters of diff in all; a diff
  longer than 16,000 characters is cut, with a note.
- `commands_run`: the Bash commands the agent ran, in order: `{"command", "exit_code"}`
  (`exit_code` is `null` when the command could not start), with `"timed_out": true` for
  one killed at its time limit. A resumed plan lists those of its last attempt.
- `turns`, `tool_calls`: model turns and tool calls used.
- `tokens`: `input`, `output`, `cache_creation`, `cache_read` and their `total`.
- `cost_usd`: the estimated cost of those tokens.
- `wall_seconds`: the plan's elapsed time.
- `resumable`: it stopped for a reason outside its conversation (interrupted, the API or
  the sandbox failed), so `planrun plans resume` can go on with its conversation.
- `continued`: it went on with the conversation of an earlier attempt that stopped.
- `validation`: the plan's validation rounds: `rounds` (checks run: 0 when no plan was
  checked, 2 when validation sent feedback and the model answered it), `feedback` (the
  problems the feedback round asked the model to fix, empty when the first check passed)
  and `fixed_after_feedback` (the plan failed its first check and is valid now).
"""
"""How report.json is laid out, field by field (Markdown, for docs/report-schema.md)."""
