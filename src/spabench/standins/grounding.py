"""Instruction grounding for the scripted stand-in policy (not a VLA).

parse_instruction: which template of the task produced the prompt, with which concept words,
argument, target and references. It renders every candidate through the suite's own `fill`
(tasks/<task>/prompts.yaml templates, matrix concept words and argument displays, the scene's
object display names) and keeps the exact matches, so the policy reads instructions the way the
generator writes them.

decide: what to do about it, from the privileged scene state (never from the scene's goal):
  compositional  grounds every concept with the suite's resolvers (spabench.suite.resolvers) on
                 the *current* object poses: the resolved target goes into the bowl, the relation
                 is produced, the count is reached; nothing valid to do -> no action.
  memorising     a spatial instruction is grounded only when its (concept, argument) cell is an
                 observed cell of the task matrix; otherwise it picks uniformly among the plausible
                 candidates (seeded): the named kind's instances, every table object, a direction,
                 a goal count. Direct instructions (named targets) are always grounded.
  state_blind    compositional, except that it ignores state words: an Object State instruction
                 is read by colour and category only ("the ... white cup"), and it picks uniformly
                 (seeded) among the named kind's instances on the table. With the suite's A/B twins
                 it takes the wrong twin about half the time: the benchmark's check that Object
                 State scenes cannot be solved without the state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from itertools import permutations

import numpy as np

from spabench.suite.model import Cell, Goal, Instructions, ObjectState, PlacedObject, SceneSpec
from spabench.suite.vocabulary import DIRECTIONS

MODES = ("compositional", "memorising", "state_blind")


def normalise(text: str) -> str:
    text = text.lower().replace("\u2019", "'")
    text = re.sub(r"[^a-z0-9' -]+", " ", text)
    return re.sub(r"\s+", " ", text).strip()


@dataclass(frozen=True)
class Parse:
    """One reading of the prompt: the template kind and the values that filled it."""

    task: str
    kind: str                            # spatial, paraphrase_spatial, direct, direct_removal, ...
    concept: str | None = None           # concept key (first of those sharing the words)
    concept_keys: tuple[str, ...] = ()   # every concept key worded this way
    argument: str | None = None          # argument key
    target: str | None = None            # display name of a named target (direct kinds)
    references: tuple[str, ...] = ()     # object ids named as references

    @property
    def spatial(self) -> bool:
        return "direct" not in self.kind


@dataclass(frozen=True)
class Decision:
    """What the policy will do."""

    action: str                          # none | to_bowl | to_table | relation | count
    targets: tuple[str, ...] = ()        # objects to move, in order
    reference: str | None = None
    direction: str | None = None
    count: int | None = None
    place_xy_cm: tuple[tuple[float, float], ...] = ()   # to_table / relation: where each target goes
    alternatives: tuple[str, ...] = ()   # counting: any of these would do as well
    grounded: bool = True                # False: memorising mode picked by chance
    cell: str | None = None
    reason: str = ""
    parse: Parse | None = field(default=None, compare=False)


# ---------------------------------------------------------------------- parsing
def _placeholders(template: str) -> set[str]:
    return set(re.findall(r"{(\w+)}", template))


def parse_instruction(prompt: str, task, objects: list[dict]) -> list[Parse]:
    """Every (kind, concept, argument, target, references) whose rendering equals the prompt."""
    from spabench.suite.wording import fill

    want = normalise(prompt)
    names = {o["object_id"]: o for o in objects}
    inventory = {oid: _spec_like(o) for oid, o in names.items()}
    out: list[Parse] = []
    for kind, templates in task.templates.items():
        paraphrase = kind.startswith("paraphrase")
        for template in templates:
            ph = _placeholders(template)
            concepts = list(task.concepts) if "concept" in ph else [None]
            arguments = list(task.arguments) if "argument" in ph else [None]
            targets = list(names) if "target" in ph else [None]
            if "references" in ph:
                refs = [p for n in (1, 2) for p in permutations(names, n)]
            elif "reference" in ph:
                refs = [(r,) for r in names]
            else:
                refs = [()]
            for concept in concepts:
                for argument in arguments:
                    cell = Cell(concept or "", argument or "")
                    for target in targets:
                        for ref in refs:
                            text = fill(template, task, cell, (target,) if target else (), ref,
                                        inventory, paraphrase=paraphrase)
                            if normalise(text) != want:
                                continue
                            arg = task.arguments.get(argument) if argument else None
                            if arg is not None and arg.references and ref and tuple(ref) != tuple(arg.references):
                                continue  # e.g. "green pen" names several pairs; the reference decides
                            out.append(Parse(task=task.name, kind=kind, concept=concept,
                                             argument=argument,
                                             target=names[target]["display_name"] if target else None,
                                             references=tuple(ref)))
    # merge readings that differ only by concept keys sharing words (ordinal positions)
    merged: dict[tuple, Parse] = {}
    for p in out:
        key = (p.kind, p.argument, p.target, p.references, _concept_words(task, p.concept, p.kind))
        if key in merged:
            prev = merged[key]
            merged[key] = replace(prev, concept_keys=prev.concept_keys + ((p.concept,) if p.concept else ()))
        else:
            merged[key] = replace(p, concept_keys=(p.concept,) if p.concept else ())
    return list(merged.values())


def _concept_words(task, concept: str | None, kind: str) -> str | None:
    if concept is None:
        return None
    spec = task.concepts[concept]
    return spec.paraphrase if kind.startswith("paraphrase") else spec.words


class _SpecLike:
    """What `fill` reads of an ObjectSpec (display_name), built from the privileged payload."""

    def __init__(self, display_name: str):
        self.display_name = display_name


def _spec_like(obj: dict) -> _SpecLike:
    return _SpecLike(obj["display_name"])


# ---------------------------------------------------------------------- live scene
def live_scene(privileged: dict, task: str, cell: Cell, references=()) -> SceneSpec:
    """A SceneSpec of the *current* state (positions, states, bowl membership) for the resolvers."""
    placed = []
    for o in privileged["objects"]:
        state = o.get("state") or {}
        pose = state.get("pose")
        placed.append(PlacedObject(
            object_id=o["object_id"], x_cm=float(o["pos_cm"][0]), y_cm=float(o["pos_cm"][1]),
            yaw_deg=float(o.get("yaw_deg", 0.0)),
            state=ObjectState(lid=state.get("lid"), pose=pose if pose in ("upright", "upside_down") else None),
            location="bowl" if o.get("in_bowl") else "table"))
    return SceneSpec(scene_id="live", task=task, condition="id", cell=cell, withheld=False,
                     objects=tuple(placed), instructions=Instructions(spatial=""),
                     goal=Goal(kind="in_bowl"), references=tuple(references))


def _table(privileged: dict) -> list[dict]:
    return [o for o in privileged["objects"] if not o.get("in_bowl")]


def _bowl(privileged: dict) -> list[dict]:
    return [o for o in privileged["objects"] if o.get("in_bowl")]


# ---------------------------------------------------------------------- deciding
class Grounder:
    """Parses and grounds instructions against a loaded suite (tasks/ folder)."""

    def __init__(self, suite, mode: str = "compositional", rng: np.random.Generator | None = None):
        if mode not in MODES:
            raise ValueError(f"scripted policy mode {mode!r} (allowed: {', '.join(MODES)})")
        self.suite = suite
        self.mode = mode
        self.rng = rng or np.random.default_rng(0)

    def parse(self, prompt: str, privileged: dict) -> Parse | None:
        """The best reading of the prompt: the payload's task first, then any task."""
        hint = (privileged.get("scene") or {}).get("task")
        order = [hint] if hint in self.suite.tasks else []
        order += [t for t in self.suite.tasks if t not in order]
        for name in order:
            parses = parse_instruction(prompt, self.suite.tasks[name], privileged["objects"])
            if parses:
                return sorted(parses, key=lambda p: (not p.spatial, p.kind))[0]
        return None

    def decide(self, prompt: str, privileged: dict) -> Decision:
        parse = self.parse(prompt, privileged)
        if parse is None:
            return Decision("none", reason=f"instruction not understood: {prompt!r}")
        if not parse.spatial:
            return self._direct(parse, privileged)
        return self._spatial(parse, privileged)

    # -- direct: the named object
    def _direct(self, parse: Parse, privileged: dict) -> Decision:
        removal = parse.kind.endswith("removal")
        pool = _bowl(privileged) if removal else _table(privileged)
        named = [o["object_id"] for o in pool if normalise(o["display_name"]) == normalise(parse.target or "")]
        if not named:
            return Decision("none", reason=f"no {parse.target!r} to move", parse=parse)
        if removal:
            return Decision("to_table", targets=(named[0],), place_xy_cm=(self._free_spot(privileged),),
                            reason="direct removal", parse=parse)
        return Decision("to_bowl", targets=(named[0],), reason="direct", parse=parse)

    # -- spatial: ground the concept (or not)
    def _spatial(self, parse: Parse, privileged: dict) -> Decision:
        from spabench.suite import resolvers

        task = self.suite.tasks[parse.task]
        concept = parse.concept or ""     # a cell's key part is "" where the template has no concept
        if parse.task == "ordinal_position":
            n = len(_table(privileged))
            matching = [k for k in parse.concept_keys if k.endswith(f"_of_{n}")]
            concept = matching[0] if matching else parse.concept_keys[0]

        if parse.task == "counting":
            goal = resolvers.goal_count(concept)
            if goal is None:
                return Decision("none", reason=f"{concept!r} is not a count", parse=parse)
            now = len(_bowl(privileged))
            change = "already_holds" if now == goal else ("addition" if now < goal else "removal")
            cell = Cell(concept, change)
            if not self._knows(task, cell):
                choices = sorted({g for c in task.cells if (g := resolvers.goal_count(c.concept)) is not None})
                goal = int(self.rng.choice(choices))
                return self._count(goal, privileged, parse, cell, grounded=False)
            return self._count(goal, privileged, parse, cell, grounded=True)

        if parse.task == "relational_placement":
            cell = Cell(concept, parse.argument or "")
            arg = task.arguments.get(parse.argument or "")
            if arg is None or not arg.objects or not arg.references:
                return Decision("none", reason="relation without a target/reference", parse=parse)
            target, reference = arg.objects[0], arg.references[0]
            direction = concept
            grounded = self._knows(task, cell)
            if not grounded:
                direction = str(self.rng.choice(DIRECTIONS))
            return self._relation(target, reference, direction, privileged, parse, cell, grounded)

        argument = parse.argument
        if self.mode == "state_blind" and parse.task == "object_state":
            arg = task.arguments.get(argument or "")
            kind = sorted(o["object_id"] for o in _table(privileged) if arg is not None and o["object_id"] in arg.objects)
            if not kind:
                return Decision("none", grounded=False, reason="state-blind: no object of the named kind",
                                parse=parse)
            pick = str(self.rng.choice(kind))
            return Decision("to_bowl", targets=(pick,), grounded=False, cell=Cell(concept, argument or "").key,
                            reason=f"state-blind: chance among {kind}", parse=parse)
        scene = live_scene(privileged, parse.task, Cell(concept, argument or ""), parse.references)
        answer = sorted(resolvers.resolve_targets(scene, self.suite))
        if argument is None:
            # relative size / ordinal: the cell's argument is the kind of object that is the answer
            argument = next((k for k, a in task.arguments.items() if answer and answer[0] in a.objects), "")
        cell = Cell(concept, argument)
        if self._knows(task, cell):
            if not answer:
                return Decision("none", cell=cell.key, reason="no valid target", parse=parse)
            return Decision("to_bowl", targets=(answer[0],), cell=cell.key, reason="grounded", parse=parse)
        candidates = self._candidates(parse, task, privileged)
        if not candidates:
            return Decision("none", grounded=False, cell=cell.key, reason="no candidate", parse=parse)
        pick = str(self.rng.choice(candidates))
        return Decision("to_bowl", targets=(pick,), grounded=False, cell=cell.key,
                        reason=f"chance among {candidates}", parse=parse)

    def _knows(self, task, cell: Cell) -> bool:
        if self.mode in ("compositional", "state_blind"):
            return True
        return task.cell_status(cell) == "observed"

    def _candidates(self, parse: Parse, task, privileged: dict) -> list[str]:
        """Who a policy that has not learnt this cell might take: the named kind's instances (and,
        for Object State, anything else in the named state), else every table object."""
        from spabench.suite.resolvers import state_matches

        table = [o["object_id"] for o in _table(privileged) if o["object_id"] not in parse.references]
        arg = task.arguments.get(parse.argument) if parse.argument else None
        if parse.task == "object_state" and parse.concept:
            scene = live_scene(privileged, parse.task, Cell(parse.concept, parse.argument or ""))
            in_state = {p.object_id for p in scene.objects if state_matches(p.state, parse.concept)}
            named = {o for o in table if arg is not None and o in arg.objects}
            pool = sorted((named | in_state) & set(table))
            if pool:
                return pool
        if arg is not None and arg.objects:
            listed = [o for o in table if o in arg.objects]
            if listed:
                return sorted(listed)
        return sorted(table)

    def _count(self, goal: int, privileged: dict, parse: Parse, cell: Cell, grounded: bool) -> Decision:
        inside = sorted(o["object_id"] for o in _bowl(privileged))
        outside = [o["object_id"] for o in _table(privileged)]
        if goal == len(inside):
            return Decision("none", count=goal, grounded=grounded, cell=cell.key,
                            reason="count already holds", parse=parse)
        if goal > len(inside):
            bowl = np.asarray(privileged["bowl"]["pos_cm"][:2], float)
            outside.sort(key=lambda oid: _dist(privileged, oid, bowl))
            n = goal - len(inside)
            return Decision("to_bowl", targets=tuple(outside[:n]), alternatives=tuple(outside[n:]), count=goal,
                            grounded=grounded, cell=cell.key, reason="add to reach the count", parse=parse)
        # take out the roomiest first: each removal leaves the rest more room for the fingers
        ranked = sorted(inside, key=lambda oid: -_room(privileged, oid))
        movers = tuple(ranked[:len(inside) - goal])
        spots: list[tuple[float, float]] = []
        for _ in movers:
            spots.append(self._free_spot(privileged, avoid=spots))
        return Decision("to_table", targets=movers, place_xy_cm=tuple(spots), count=goal,
                        alternatives=tuple(ranked[len(movers):]),
                        grounded=grounded, cell=cell.key, reason="remove to reach the count", parse=parse)

    def _relation(self, target, reference, direction, privileged, parse, cell, grounded) -> Decision:
        from spabench.suite.geometry import relation_holds

        objs = {o["object_id"]: o for o in privileged["objects"]}
        if target not in objs or reference not in objs:
            return Decision("none", reason="target or reference missing", parse=parse)
        t_xy = tuple(objs[target]["pos_cm"][:2])
        r_xy = tuple(objs[reference]["pos_cm"][:2])
        if relation_holds(t_xy, r_xy, direction):
            return Decision("none", reference=reference, direction=direction, grounded=grounded,
                            cell=cell.key, reason="relation already holds", parse=parse)
        from spabench.suite.geometry import DIRECTION_VECTORS

        gap = _radius(objs[target]) + _radius(objs[reference]) + 1.5
        dist = float(np.clip(gap, 3.5, 6.0))
        place = np.asarray(r_xy, float) + np.asarray(DIRECTION_VECTORS[direction], float) * dist
        return Decision("relation", targets=(target,), reference=reference, direction=direction,
                        place_xy_cm=((float(place[0]), float(place[1])),), grounded=grounded,
                        cell=cell.key, reason="place in the requested sector", parse=parse)

    def _free_spot(self, privileged: dict, avoid=()) -> tuple[float, float]:
        """A table point in the workspace far from every object and the bowl."""
        g = self.suite.geometry
        xs = np.linspace(g.workspace_x_cm[0] + 2, g.workspace_x_cm[1] - 2, 7)
        ys = np.linspace(g.workspace_y_cm[0] + 2, g.workspace_y_cm[1] - 2, 9)
        others = [np.asarray(o["pos_cm"][:2], float) for o in privileged["objects"]]
        others += [np.asarray(p, float) for p in avoid]
        bowl = np.asarray(g.bowl_xy_cm, float)
        best, best_d = (float(xs[0]), float(ys[-1])), -1.0
        for x in xs:
            for y in ys:
                p = np.array([x, y])
                d = min([np.linalg.norm(p - q) for q in others] + [np.linalg.norm(p - bowl) - 5.0])
                if d > best_d:
                    best, best_d = (float(x), float(y)), d
        return best


def _dist(privileged: dict, oid: str, xy) -> float:
    o = next(o for o in privileged["objects"] if o["object_id"] == oid)
    return float(np.linalg.norm(np.asarray(o["pos_cm"][:2], float) - xy))


def _room(privileged: dict, oid: str) -> float:
    """Free gap (cm) between an object and its nearest neighbour in the bowl, or the bowl's wall."""
    objs = {o["object_id"]: o for o in privileged["objects"]}
    me = objs[oid]
    xy = np.asarray(me["pos_cm"][:2], float)
    bowl = privileged["bowl"]
    gaps = [float(bowl["inner_radius_cm"]) - float(np.linalg.norm(xy - np.asarray(bowl["pos_cm"][:2], float)))
            - _radius(me)]
    for other in objs.values():
        if other["object_id"] != oid and other.get("in_bowl"):
            gaps.append(float(np.linalg.norm(xy - np.asarray(other["pos_cm"][:2], float)))
                        - _radius(me) - _radius(other))
    return min(gaps)


def _radius(obj: dict) -> float:
    dims = obj.get("twin_dims_cm") or obj.get("size_cm") or [4.0, 4.0, 4.0]
    return 0.5 * float(max(dims[0], dims[1]))
