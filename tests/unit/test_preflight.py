"""The checks before anything is claimed or paid for: the key and the model asked of the
fake Messages API (as the real SDK asks the real one), Docker, and misspelt perspectives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.errors import ConfigError, DockerUnavailableError, ImageMissingError
from sandbox_runner.model.access import check_access
from sandbox_runner.runs.perspective_names import (
    check_perspective_names,
    edit_distance,
    likely_meant,
)
from sandbox_runner.runs.preflight import AccessCheck, PreflightError, preflight
from tests.support.fake_messages_api import FakeMessagesAPI, error

MODELS = ["claude-sonnet-4-6", "claude-opus-4-8", "claude-haiku-4-5"]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(api_key="good-key", models=MODELS) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "good-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        yield server


def test_a_known_model_and_a_good_key_pass_without_a_paid_request(api: FakeMessagesAPI) -> None:
    assert check_access("claude-sonnet-4-6") is None
    assert api.requests == []  # no Messages request, no count_tokens: nothing billed
    assert [lookup.path for lookup in api.lookups] == ["/v1/models/claude-sonnet-4-6"]


def test_a_rejected_key_is_one_line_naming_the_variable(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "bad-key")
    problem = check_access("claude-sonnet-4-6")
    assert problem is not None and not problem.model_at_fault
    assert problem.message.startswith("the API key was rejected (401)")
    assert "check ANTHROPIC_API_KEY" in problem.message


def test_an_unknown_model_is_named_with_the_closest_listed_one(api: FakeMessagesAPI) -> None:
    problem = check_access("claude-sonet-4-6")
    assert problem is not None and problem.model_at_fault
    assert problem.message == (
        "the model 'claude-sonet-4-6' does not exist (404): did you mean claude-sonnet-4-6?"
    )
    assert problem.suggestion == "claude-sonnet-4-6"


def test_a_model_close_to_none_gets_no_guess(api: FakeMessagesAPI) -> None:
    problem = check_access("gpt-5")
    assert problem is not None and problem.suggestion is None
    assert problem.message == "the model 'gpt-5' does not exist (404)"


def test_no_key_at_all_is_said_without_asking_the_api(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    problem = check_access("claude-sonnet-4-6")
    assert problem is not None and problem.message.startswith("ANTHROPIC_API_KEY is not set")
    assert api.lookups == []


def test_an_endpoint_without_the_models_route_is_no_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeMessagesAPI() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url + "/elsewhere")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "key")
        # A 404 that does not name the model: the route is missing, the model may be fine.
        assert check_access("claude-sonnet-4-6") is None


def test_an_api_that_cannot_be_reached_is_said_with_its_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeMessagesAPI() as server:
        address = server.base_url
    monkeypatch.setenv("ANTHROPIC_BASE_URL", address)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "key")
    problem = check_access("claude-sonnet-4-6")
    assert problem is not None and problem.message.startswith("cannot reach the Anthropic API")
    assert address in problem.message


def test_the_fake_api_answers_an_unknown_model_as_the_real_one_does(api: FakeMessagesAPI) -> None:
    import anthropic

    client = anthropic.Anthropic(max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="claude-nope", max_tokens=1, messages=[])
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "model: claude-nope"},
    }
    assert error(404, "not_found_error", "model: claude-nope").body() == caught.value.body


# Preflight: the checks side by side, one line each


def test_every_failure_is_its_own_line_api_first(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "bad-key")

    def no_engine() -> Any:
        raise DockerUnavailableError("no engine socket at /run/nothing.sock", "install it")

    with pytest.raises(PreflightError) as caught:
        preflight(no_engine, AccessCheck(["claude-sonnet-4-6"], "set it with --model"))
    first, second = caught.value.problems
    assert first.startswith("the API key was rejected (401)")
    assert second == (
        "no Docker engine (no engine socket at /run/nothing.sock): run `planrun engine start` "
        "(or set DOCKER_HOST to a running engine)"
    )


def test_an_unknown_model_says_how_to_choose_another(api: FakeMessagesAPI) -> None:
    with pytest.raises(PreflightError) as caught:
        preflight(lambda: None, AccessCheck(["claude-sonet-4-6"], "set it with --model or /model"))
    assert caught.value.problems == [
        "the model 'claude-sonet-4-6' does not exist (404): did you mean claude-sonnet-4-6?; "
        "set it with --model or /model"
    ]


def test_a_missing_image_keeps_its_own_advice() -> None:
    def no_image() -> Any:
        raise ImageMissingError("planrun-sandbox:1")

    with pytest.raises(PreflightError) as caught:
        preflight(no_image, None)
    assert caught.value.problems == [str(ImageMissingError("planrun-sandbox:1"))]


def test_checks_that_pass_return_dockers_answer(api: FakeMessagesAPI) -> None:
    access = AccessCheck(["claude-sonnet-4-6", "claude-sonnet-4-6", "claude-haiku-4-5"], "")
    assert preflight(lambda: "factory", access) == "factory"
    assert len(api.lookups) == 2  # each model asked about once


# Perspectives


PRESETS = {"default": [], "thorough": ["simplicity", "performance", "security"]}


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("thorugh", "thorough"),
        ("Thorough", "thorough"),
        ("securty", "security"),
        ("secuirty", "security"),
        ("defualt", "default"),
    ],
)
def test_a_name_a_letter_or_two_from_a_known_one_is_a_usage_error(name: str, meant: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_perspective_names([name], PRESETS)
    assert f"did you mean {meant!r}?" in str(caught.value)
    assert f"custom:{name}" in str(caught.value)


@pytest.mark.parametrize("name", ["cost", "conformance", "accessibility", "thorough", "security"])
def test_names_known_or_far_from_any_are_taken_as_they_are(name: str) -> None:
    check_perspective_names([name], PRESETS)


def test_the_custom_prefix_keeps_a_name_close_to_a_preset() -> None:
    check_perspective_names(["custom:thorugh"], PRESETS)


def test_built_in_perspectives_are_known_without_a_preset_and_typos_of_them_refused() -> None:
    from sandbox_runner.agents.prompt import PERSPECTIVES

    for name in ("maintainability", "Minimal change", "minimal_change", "TESTABILITY"):
        check_perspective_names([name], {"default": []}, PERSPECTIVES)
    with pytest.raises(ConfigError, match="did you mean 'maintainability'"):
        check_perspective_names(["maintanability"], {"default": []}, PERSPECTIVES)
    with pytest.raises(ConfigError, match="did you mean 'simplicity'"):
        check_perspective_names(["simplicty"], {"default": []}, PERSPECTIVES)
    check_perspective_names(["custom:simplicty"], {"default": []}, PERSPECTIVES)


def test_likely_meant_prefers_the_closest_name() -> None:
    assert likely_meant("secure", {"security", "secure-ish", "secured"}) == "secured"
    assert likely_meant("x", {"default"}) is None


def test_edit_distance_counts_a_swap_of_neighbours_as_one() -> None:
    assert edit_distance("secuirty", "security") == 1
    assert edit_distance("thorugh", "thorough") == 1
    assert edit_distance("performance", "conformance") == 3
    assert edit_distance("", "abc") == 3


def test_custom_names_are_perspectives_never_presets(tmp_path: Path) -> None:
    from sandbox_runner.config import load_settings

    (tmp_path / ".planrun").mkdir()
    (tmp_path / ".planrun" / "config.yaml").write_text("perspectives:\n  thorough: [a, b]\n")
    loaded = load_settings(tmp_path)
    assert loaded.expand_perspectives(["custom:thorough", "custom:cost"]) == ["thorough", "cost"]
    assert loaded.expand_perspectives(["thorough"]) == ["a", "b"]


def test_a_check_that_breaks_is_no_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    import sandbox_runner.model.access as access

    def broken(model_id: str) -> None:
        raise RuntimeError("an SDK bug")

    monkeypatch.setattr(access, "check_access", broken)
    assert AccessCheck(["claude-sonnet-4-6"], "").problems() == []


def test_a_model_id_the_endpoint_lists_reaches_the_terminal_inert(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeMessagesAPI(models=["claude-sonnet-4-6\x1b]8;;http://evil\x07"]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "key")
        problem = check_access("claude-sonnet-4-6")
    assert problem is not None and problem.suggestion is not None
    assert "\x1b" not in problem.message and "\x07" not in problem.message


def test_a_rejected_token_names_the_token_variable(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "wrong-token")
    problem = check_access("claude-sonnet-4-6")
    assert problem is not None and problem.message.endswith("check ANTHROPIC_AUTH_TOKEN")
