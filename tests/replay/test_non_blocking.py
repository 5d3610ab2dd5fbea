"""Host-to-device copies are non-blocking on CUDA only (``non_blocking_copy``).

CUDA stages a copy from pageable host memory before the call returns, so the ring may free or
reuse the numpy buffer at once. MPS does not: a non-blocking CPU -> MPS copy reads its source
after the call returns and stores garbage if the buffer was freed or reused meanwhile
(pytorch/pytorch#189690, torch 2.13), and xpu or ``privateuseone`` backends document no such
guarantee. Every ``.to``/``copy_`` with ``non_blocking`` in ``gymcurric/replay`` and
``gymcurric/integrations`` (the SB3 replay adapter writes the ring's device too) must take the
helper's decision: the source check below parses those packages (nothing is imported) and
reports any other value. ``meta`` stands in for such a device in the op counts (no GPU here).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from gymcurric.replay import ReplayRing
from gymcurric.replay import storage as storage_module
from gymcurric.replay._checks import non_blocking_copy
from gymcurric.replay.opcount import count_ops

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "gymcurric" / "replay"
#: the integrations copy host data too (the SB3 adapter writes the ring's device): same rule
INTEGRATIONS = ROOT / "gymcurric" / "integrations"
ADAPTER = "gymcurric/integrations/sb3/replay.py"
HELPER = "non_blocking_copy"
E = 4


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cuda", True),
        ("cuda:1", True),
        ("mps", False),
        ("xpu", False),
        ("privateuseone", False),
        ("meta", False),
        ("cpu", False),
    ],
)
def test_only_copies_to_cuda_are_non_blocking(device, expected):
    assert non_blocking_copy(torch.device(device)) is expected


# ---------------------------------------------------------------- every site takes the decision
def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr | None]:
    """Each parameter's default (None: none), keyword-only ones included."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    found = dict(zip((a.arg for a in positional), defaults + list(args.defaults), strict=True))
    found.update(zip((a.arg for a in args.kwonlyargs), args.kw_defaults, strict=True))
    return found


class _Sites(ast.NodeVisitor):
    """The ``non_blocking`` values of one module that do not come from the helper."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.problems: list[str] = []
        self.checked = 0  # the keyword arguments seen (so that the check is not vacuous)

    def report(self, node: ast.AST, what: str) -> None:
        self.problems.append(f"{self.filename}:{getattr(node, 'lineno', '?')}: {what}")

    def decided(self, value: ast.expr) -> bool:
        """Whether ``value`` is the helper's decision (or False, or And-ed with it)."""
        if isinstance(value, ast.Constant):
            return value.value is False
        if isinstance(value, ast.Call):
            return _called(value) == HELPER
        if isinstance(value, ast.Attribute):  # RingStorage.non_blocking: its assignment is checked
            return value.attr == "non_blocking"
        if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
            return any(self.decided(v) for v in value.values)  # True only if the helper says so
        if isinstance(value, ast.Name):
            for function in reversed(self.functions):  # closures: the enclosing functions too
                parameters = _parameters(function)
                if value.id in parameters:  # only non_blocking, checked in visit_FunctionDef
                    return value.id == "non_blocking"
                assigned = [
                    node.value
                    for node in ast.walk(function)
                    if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
                ]
                if assigned:
                    return all(self.decided(v) for v in assigned)
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if "non_blocking" in _parameters(node):
            default = _parameters(node)["non_blocking"]
            keyword_only = "non_blocking" in {a.arg for a in node.args.kwonlyargs}
            if not keyword_only or not (default is None or self.decided(default)):
                self.report(node, f"{node.name}: non_blocking must be keyword-only, default False")
        self.functions.append(node)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "non_blocking"
                and (
                    node.value is None
                    or not self.decided(node.value)
                    or isinstance(node.value, ast.Attribute)
                )
            ):
                self.report(node, f"{ast.unparse(node)}: assign {HELPER}(device)")
        self.generic_visit(node)

    visit_AnnAssign = visit_Assign

    def visit_Call(self, node: ast.Call) -> None:
        name = _called(node)
        if (name == "to" and len(node.args) >= 3) or (name == "copy_" and len(node.args) >= 2):
            self.report(node, f"{ast.unparse(node)}: pass non_blocking by keyword")
        for keyword in node.keywords:
            if keyword.arg == "non_blocking":
                self.checked += 1
                if not self.decided(keyword.value):
                    self.report(node, f"{ast.unparse(node)}: non_blocking not from {HELPER}")
        self.generic_visit(node)


def unguarded(source: str, filename: str = "<source>") -> tuple[list[str], int]:
    """The problems of ``source`` and the number of ``non_blocking=`` arguments it has."""
    sites = _Sites(filename)
    sites.visit(ast.parse(source, filename))
    return sites.problems, sites.checked


def test_every_non_blocking_copy_of_the_replay_package_and_integrations_takes_the_decision():
    problems, checked = [], Counter[str]()
    for path in sorted([*REPLAY.rglob("*.py"), *INTEGRATIONS.rglob("*.py")]):
        name = path.relative_to(ROOT).as_posix()
        found, checked[name] = unguarded(path.read_text(encoding="utf-8"), name)
        problems += found
    assert not problems, "non_blocking not decided by non_blocking_copy:\n" + "\n".join(problems)
    # the copies and the calls passing the ring's decision on, the SB3 adapter's mirror of
    # the pending next observation included (a plain copy_ there passes no non_blocking)
    assert checked.total() >= 11 and checked[ADAPTER] >= 1, checked


@pytest.mark.parametrize(
    "source",
    [
        "x.to(device, non_blocking=True)",
        "x.to(device, torch.float32, True)",
        "x.copy_(y, True)",
        "x.copy_(y, non_blocking=device.type != 'cpu')",
        "def f(x, d, flag=True):\n    return x.to(d, non_blocking=flag)",
        "def f(x, d, non_blocking=True):\n    return x.to(d, non_blocking=non_blocking)",
        "def f(x, d, non_blocking):\n    return x.to(d, non_blocking=non_blocking)",
        "self.non_blocking = device.type != 'cpu'",
        "self.non_blocking: bool = True",
        "def f(x, d):\n    nb = d.type != 'cpu'\n    return x.to(d, non_blocking=nb)",
        "x.to(d, non_blocking=ok or non_blocking_copy(d))",
    ],
)
def test_the_source_check_refuses_a_decision_of_its_own(source):
    problems, _ = unguarded(source)
    assert problems, source


@pytest.mark.parametrize(
    "source",
    [
        "x.to(d, non_blocking=non_blocking_copy(d))",
        "x.copy_(y, non_blocking=storage.non_blocking and not y.is_pinned())",
        "self.non_blocking = non_blocking_copy(device)",
        "def f(x, d, *, non_blocking=False):\n    return x.to(d, non_blocking=non_blocking)",
        "def f(x, d):\n    nb = ok and non_blocking_copy(d)\n"
        "    def g():\n        return x.to(d, non_blocking=nb)\n    return g()",
    ],
)
def test_the_source_check_takes_the_helpers_decision(source):
    assert unguarded(source)[0] == []


# ---------------------------------------------------------------- a device other than CUDA
def other_device_ring(monkeypatch, action_dtype=torch.float32):
    """A device-index ring on ``meta``, a device that is neither CPU nor CUDA (as MPS is)."""
    cpu_generator = torch.Generator  # torch has no meta generator: the ring gets a CPU one
    fields = {"obs": ((3,), torch.float32), "action": ((2,), action_dtype)}
    with monkeypatch.context() as m:
        m.setattr(torch, "Generator", lambda device=None: cpu_generator())
        return ReplayRing(8, E, fields, "meta", index_strategy="device", memory_budget=2**40)


def host_to_device(counted):
    """The host-to-device copies that ``count_ops`` saw, as (copies, blocking ones)."""
    copies = Counter(op.split(" ")[0] for op in counted.transfers)
    syncs = Counter(counted.syncs)  # a blocking host-to-device copy is a sync
    return sum(copies.values()), sum(min(n, syncs[op]) for op, n in copies.items())


def test_host_data_goes_to_a_device_other_than_cuda_in_blocking_copies(monkeypatch):
    # on the old code every one of these was non-blocking: the numpy buffers (the staged
    # flags, the float64 final_obs cast, the attach mask) are freed right after the call,
    # which MPS reads later (pytorch/pytorch#189690)
    ring = other_device_ring(monkeypatch)
    ended = np.arange(E) == 1
    calls = {
        "push": lambda: ring.push_step(
            np.zeros((E, 3), np.float32),
            np.zeros((E, 2), np.float32),
            np.ones(E),
            cost=np.zeros(E),
            terminated=ended,
            truncated=np.zeros(E, bool),
            final_obs=np.zeros((E, 3), np.float64),
        ),
        "mixed flags": lambda: ring.push_step(
            torch.zeros(E, 3, device="meta"),
            torch.zeros(E, 2, device="meta"),
            np.ones(E),
            terminated=torch.zeros(E, dtype=torch.bool, device="meta"),
            truncated=np.zeros(E, bool),
        ),
        "attach_final_obs": lambda: ring.attach_final_obs(0, np.zeros((E, 3)), ended),
        "start_episodes_at_next_push": lambda: ring.start_episodes_at_next_push(ended),
    }
    for name, call in calls.items():
        with count_ops() as counted:
            call()
        copies, blocking = host_to_device(counted)
        assert copies and blocking == copies, (name, counted.transfers, counted.syncs)


def test_bfloat16_action_rows_go_to_a_device_other_than_cuda_in_blocking_copies(monkeypatch):
    ring = other_device_ring(monkeypatch, torch.bfloat16)
    episode = {
        "obs": np.zeros((4, 3), np.float32),
        "action": np.zeros((3, 2)),
        "reward": np.ones(3),
        "terminated": True,
    }
    with count_ops() as counted:
        report = ring.extend_from_episodes([episode] * E)  # one per env: every row kept
    assert report.rows == 3
    copies, blocking = host_to_device(counted)
    assert copies and blocking == copies, (counted.transfers, counted.syncs)


# ---------------------------------------------------------------- pinned sources on CUDA
def test_a_pinned_source_is_copied_blocking_even_where_copies_may_be_non_blocking(monkeypatch):
    # a numpy view of pinned memory (a staging buffer the env writes into) is copied without
    # staging by a non-blocking copy, which reads it after the call: the next write of its
    # owner reached the ring. copy_in copied such a source blocking, but the reward column
    # and the final observations (push_step's and attach_final_obs's) did not
    cpu_generator = torch.Generator  # meta stands in for CUDA (as in test_ring_ops)
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)}
    with monkeypatch.context() as m:
        m.setattr(torch, "Generator", lambda device=None: cpu_generator())
        m.setattr(storage_module, "non_blocking_copy", lambda device: device.type == "meta")
        ring = ReplayRing(8, E, fields, "meta", index_strategy="device", memory_budget=2**40)
    monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self, device=None: True)
    flags = torch.zeros(E, dtype=torch.bool, device="meta")
    ended = torch.ones(E, dtype=torch.bool, device="meta")
    host = np.zeros((E, 3), np.float32)
    on_device = torch.zeros(E, 3, device="meta"), torch.zeros(E, 2, device="meta")
    calls = {  # call: (host-to-device copies, the blocking ones: those of the caller's buffers)
        "push": (
            lambda: ring.push_step(
                host,
                np.zeros((E, 2), np.float32),
                np.ones(E, np.float32),
                cost=np.zeros(E, np.float32),
                terminated=flags,
                truncated=flags,
            ),
            (4, 4),  # obs, action, reward, cost
        ),
        "final_obs": (
            lambda: ring.push_step(
                *on_device,
                torch.ones(E, device="meta"),
                terminated=ended,
                truncated=flags,
                final_obs=host,
            ),
            (1, 1),
        ),
        # the mask is the ring's own copy of the caller's: non-blocking
        "attach_final_obs": (lambda: ring.attach_final_obs(0, host, np.ones(E, bool)), (2, 1)),
    }
    for name, (call, expected) in calls.items():
        with count_ops() as counted:
            call()
        assert host_to_device(counted) == expected, (name, counted.transfers, counted.syncs)


# ---------------------------------------------------------------- one decision per ring
def test_a_ring_says_whether_its_copies_may_be_non_blocking():
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)}
    assert ReplayRing(8, E, fields).non_blocking is False
    assert ReplayRing(8, E, fields, index_strategy="device").non_blocking is False
    if torch.cuda.is_available():
        assert ReplayRing(8, E, fields, "cuda").non_blocking is True


def test_bfloat16_action_rows_take_the_rings_decision(monkeypatch):
    # extend_from_episodes asked non_blocking_copy(ring.device) again instead of taking the
    # ring's decision: with meta standing in for CUDA through the ring's decision alone, its
    # bfloat16 rows (3) went over blocking while the push's own copies did not
    cpu_generator = torch.Generator
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.bfloat16)}
    with monkeypatch.context() as m:
        m.setattr(torch, "Generator", lambda device=None: cpu_generator())
        m.setattr(storage_module, "non_blocking_copy", lambda device: device.type == "meta")
        ring = ReplayRing(8, E, fields, "meta", index_strategy="device", memory_budget=2**40)
    assert ring.non_blocking is True
    episode = {
        "obs": np.zeros((4, 3), np.float32),
        "action": np.zeros((3, 2)),
        "reward": np.ones(3),
        "terminated": True,
    }
    with count_ops() as counted:
        report = ring.extend_from_episodes([episode] * E)
    assert report.rows == 3
    copies, blocking = host_to_device(counted)
    assert copies and blocking == 0, (counted.transfers, counted.syncs)


@pytest.mark.parametrize("strategy", ["host", "device"])
def test_a_ring_on_cpu_0_is_a_cpu_ring(strategy):
    # ring_layout kept "cpu:0" as the ring's device: a CPU tensor (device "cpu", never
    # "cpu:0") was refused as on another device, and device_flags' .to(cpu:0), unlike .to(cpu),
    # copied the staged host flags at each start_episodes_at_next_push of a device-index ring
    fields = {"obs": ((3,), torch.float32), "action": ((2,), torch.float32)}
    rings = [ReplayRing(8, E, fields, d, index_strategy=strategy) for d in ("cpu", "cpu:0")]
    assert rings[1].device == torch.device("cpu")
    counts = []
    for ring in rings:
        ended = torch.arange(E) == 1
        ring.push_step(
            torch.ones(E, 3), torch.ones(E, 2), torch.ones(E), terminated=ended, truncated=~ended
        )
        with count_ops() as counted:
            ring.start_episodes_at_next_push(np.arange(E) == 0)
        counts.append(counted.ops)
    assert counts[1] == counts[0]
    assert torch.equal(rings[1].fields["obs"], rings[0].fields["obs"])
