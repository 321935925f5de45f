"""Instructions from templates: filling prompts.yaml placeholders for a scene, and the words a
direct instruction must avoid.

Both the generator (to write instructions) and the contracts (to check that a scene's instruction
says what its cell means) render through here, so the two can never drift apart.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from typing import Protocol

from spabench.suite.model import Cell, ObjectSpec, SceneSpec

PLACEHOLDERS: tuple[str, ...] = ("concept", "argument", "target", "reference", "references")

# Words that carry a spatial concept of some task; a direct instruction names its target without them.
SPATIAL_WORDS: frozenset[str] = frozenset({
    # directions and relations
    "left", "right", "front", "behind", "back", "near", "nearer", "nearest", "far", "farther",
    "farthest", "further", "furthest", "close", "closer", "closest", "between", "beside", "next",
    # ordinals
    "first", "second", "third", "fourth", "fifth", "last", "number",
    # sizes
    "small", "smaller", "smallest", "large", "larger", "largest", "big", "bigger", "biggest",
    "tiny", "tinier", "tiniest",
    # counts
    "exactly", "zero", "one", "two", "three", "four", "five", "no", "nothing", "count",
    # states
    "open", "opened", "closed", "lid", "lidded", "upright", "upside", "down",
})

_WORD = re.compile(r"[a-z]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def spatial_words_in(text: str) -> list[str]:
    """The spatial concept words a text contains (in order, deduplicated)."""
    seen: list[str] = []
    for w in words(text):
        if w in SPATIAL_WORDS and w not in seen:
            seen.append(w)
    return seen


def template_placeholders(template: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def template_kind(templates: Mapping[str, Sequence[str]], kind: str, argument: str) -> str:
    """A kind suffixed with the cell's argument (e.g. direct_removal) overrides the plain kind."""
    special = f"{kind}_{argument}"
    return special if special in templates else kind


class Named(Protocol):
    """What `fill` reads of an object: an ObjectSpec, or the twin's view of a live one."""

    @property
    def display_name(self) -> str: ...


def fill(template: str, task, cell: Cell, targets: Sequence[str], references: Sequence[str],
         objects: Mapping[str, Named], *, paraphrase: bool) -> str:
    concept = task.concepts.get(cell.concept)
    argument = task.arguments.get(cell.argument)
    names = [objects[r].display_name for r in references if r in objects]
    values = {
        "concept": "" if concept is None else (concept.paraphrase if paraphrase else concept.words),
        "argument": "" if argument is None else argument.display,
        "target": objects[targets[0]].display_name if targets and targets[0] in objects else "",
        "reference": names[0] if names else "",
        "references": " and ".join(f"the {n}" for n in names),
    }
    return template.format(**values)


def renderings(task, kind: str, scene: SceneSpec, objects: Mapping[str, ObjectSpec]) -> list[str]:
    """Every instruction of `kind` the task's templates allow for this scene's cell, targets, references."""
    resolved_kind = template_kind(task.templates, kind, scene.cell.argument)
    return [fill(t, task, scene.cell, scene.targets, scene.references, objects,
                 paraphrase=kind.startswith("paraphrase"))
            for t in task.templates.get(resolved_kind, [])]
