"""What a repository's Dockerfile may ask of a build that must not reach the network.

`network_mode="none"` holds for the build's RUN steps only: the Docker daemon itself,
on the host's network, downloads an `ADD <url>`, pulls a `FROM` or `COPY --from` image
it does not have (from any registry the file names, `127.0.0.1:5000` included), and runs
the ONBUILD triggers an image carries. So a devcontainer Dockerfile may not use ADD or
ONBUILD (COPY copies files of the repository), and every image it starts from must be on
this machine already, named without a variable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

ESCAPES = ("\\", "`")
REFUSED = {
    "ADD": "ADD can download a URL with the host's network; use COPY",
    "ONBUILD": "ONBUILD triggers run outside the build's sandbox",
}


def _logical_lines(text: str, escape: str) -> Iterator[str]:
    """The instructions of a Dockerfile read with ESCAPE as its escape character,
    continuation lines joined, comments left out."""
    text = text.lstrip("\ufeff")
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # as Docker does, inside a continuation too
        if stripped.endswith(escape):
            pending += stripped[: -len(escape)] + " "
            continue
        yield pending + stripped
        pending = ""
    if pending:
        yield pending


def dockerfile_problem(text: str, image_present: Callable[[str], bool]) -> str:
    """Why a Dockerfile cannot be built without network ("" when it can): an ADD or
    ONBUILD instruction, or a base image (FROM, COPY --from) missing here or named by a
    variable. IMAGE_PRESENT says whether the engine has an image.

    The file is read with both escape characters Docker knows (\\ and `, chosen by an
    `# escape=` directive whose place among the others Docker's versions read
    differently): a line one reading joins to the one before is an instruction in the
    other."""
    for escape in ESCAPES:
        problem = _problem(_logical_lines(text, escape), image_present)
        if problem:
            return problem
    return ""


def _problem(lines: Iterator[str], image_present: Callable[[str], bool]) -> str:
    stages: set[str] = set()
    for line in lines:
        words = line.split()
        instruction = words[0].upper()
        if instruction in REFUSED:
            return f"{instruction} is not allowed: {REFUSED[instruction]}"
        if instruction == "FROM":
            arguments = [word for word in words[1:] if not word.startswith("--")]
            image = arguments[0] if arguments else ""
            problem = _base_problem(image, stages, image_present)
            if problem:
                return problem
            if len(arguments) >= 3 and arguments[1].upper() == "AS":
                stages.add(arguments[2].lower())
        elif instruction == "COPY":
            for word in words[1:]:
                if word.lower().startswith("--from="):
                    source = word.split("=", 1)[1]
                    problem = (
                        "" if source.isdigit() else _base_problem(source, stages, image_present)
                    )
                    if problem:
                        return problem
    return ""


def _base_problem(image: str, stages: set[str], image_present: Callable[[str], bool]) -> str:
    if "$" in image:
        return f"the image {image!r} is named by a variable; name it directly"
    if not image or image.lower() == "scratch" or image.lower() in stages:
        return "" if image else "a FROM names no image"
    if not image_present(image):
        return (
            f"the image {image} is not on this machine, and the build may not pull it; "
            f"pull it first (docker pull {image})"
        )
    return ""
