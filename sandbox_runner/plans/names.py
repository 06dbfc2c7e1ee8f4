"""Random English names for plans and runs (`gentle-breeze`), never reusing one on disk."""

from __future__ import annotations

import secrets
from pathlib import Path

ADJECTIVES = """
amber ancient autumn bold brave bright brisk calm clever cosmic crisp curious daring
dawn deep eager early electric emerald fair fancy fearless fierce floral fluffy frosty
gentle gilded glad golden graceful grand green hidden hollow humble icy jolly keen kind
lively lucky lunar mellow merry mighty misty modest noble nimble olive patient plain
polished proud quick quiet rapid rosy royal rustic sandy scarlet serene shiny silent
silver simple sleek smooth snowy solar spare spring steady still stormy sunny swift
tender tidy tranquil twilight velvet vivid warm wild windy wise witty young zesty
""".split()  # noqa: SIM905 - a word list reads better as text

NOUNS = """
anchor aurora bamboo beacon birch blossom breeze brook canyon cedar cloud comet coral
cove creek dawn delta dune ember falcon fern field fjord flame forest fountain galaxy
garden glacier grove harbor hawk heron hill horizon island ivy jasmine lagoon lake
lantern leaf lily maple meadow mesa mist moon moss mountain oak ocean orchard otter owl
pebble pine planet pond prairie quartz rain raven reef river robin sage sea shadow shore
sky snow sparrow spruce star stone stream summit sun thicket thunder tide trail valley
willow wind wolf wren
""".split()  # noqa: SIM905 - a word list reads better as text

ATTEMPTS = 50


def random_name() -> str:
    """An adjective-noun pair such as `gentle-breeze`."""
    return f"{secrets.choice(ADJECTIVES)}-{secrets.choice(NOUNS)}"


def claim_directory(parent: Path) -> Path:
    """Create and return a new directory under parent with a random name never used before.

    mkdir is atomic, so two processes can never claim the same name; after many
    collisions a number is added, which makes the space of names practically endless.
    """
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(ATTEMPTS):
        name = random_name()
        if attempt >= ATTEMPTS // 2:
            name = f"{name}-{secrets.randbelow(10_000)}"
        try:
            (parent / name).mkdir()
        except FileExistsError:
            continue
        return parent / name
    raise FileExistsError(f"could not find a free name under {parent}")
