"""Tests for ``pride.flows.graph`` and ``pride.flows.mermaid``: building a plan, the checks
it makes on its own, and its picture."""

from __future__ import annotations

import pickle
import uuid

import pytest

import pride
from pride import Attach, Branch, BranchRef, Chat, Flow, InvalidFlow
from pride.flows import FlowNode


def test_add_returns_a_handle_with_the_plan() -> None:
    """add() returns a node handle holding its target, command and dependencies."""
    flow = Flow("plan")
    first = flow.add("writer", Chat("draft"))
    second = flow.add("critic", Chat("review"), depends_on=first, name="review")
    assert isinstance(second, FlowNode)
    assert (second.name, second.target, second.depends_on) == ("review", "critic", ("writer",))
    assert flow.nodes == (first, second)
    assert flow["review"] is second and "review" in flow and second in flow
    assert len(flow) == 2 and list(flow) == [first, second]
    assert not first.late_bound and not first.depends_on
    assert "review" in repr(second) and "writer" in repr(second)


def test_default_names_come_from_the_target_and_stay_unique() -> None:
    """Unnamed nodes are called after their target: writer, writer-2, writer-3."""
    flow = Flow()
    branch = Branch(name="critic")
    names = [flow.add("writer", Chat(str(i))).name for i in range(3)]
    assert names == ["writer", "writer-2", "writer-3"]
    assert flow.add(branch, Chat("x")).name == "critic"
    ref_id = uuid.uuid4()
    assert flow.add(BranchRef(ref_id), Chat("x")).name == str(ref_id)[:8]


def test_dependencies_by_name_handle_or_list_deduplicated() -> None:
    """depends_on takes one node, one name, or an iterable of them; repeats count once."""
    flow = Flow()
    a = flow.add("a", Chat("a"))
    b = flow.add("b", Chat("b"))
    c = flow.add("c", Chat("c"), depends_on=[a, "b", a, b])
    assert c.depends_on == ("a", "b")
    assert flow.add("d", Chat("d"), depends_on="c").depends_on == ("c",)
    assert flow.add("e", Chat("e"), depends_on="later").depends_on == ("later",)  # forward


def test_a_duplicate_name_is_refused_naming_it() -> None:
    """A second node with a taken name raises InvalidFlow (a ValueError) naming it."""
    flow = Flow("f")
    flow.add("a", Chat("x"), name="step")
    with pytest.raises(InvalidFlow) as info:
        flow.add("b", Chat("y"), name="step")
    assert info.value.node == "step" and info.value.flow == "f"
    assert isinstance(info.value, ValueError) and isinstance(info.value, pride.PrideError)
    assert "another node" in str(info.value)
    assert len(flow) == 1


def test_a_node_of_another_flow_or_itself_is_refused() -> None:
    """A handle from another flow, or a dependency on itself, is refused at add()."""
    one, two = Flow(), Flow()
    foreign = one.add("a", Chat("x"))
    with pytest.raises(InvalidFlow, match="another flow"):
        two.add("b", Chat("y"), depends_on=foreign)
    with pytest.raises(InvalidFlow, match="depends on itself"):
        two.add("b", Chat("y"), depends_on="b", name="b")


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"target": 42, "command": Chat("x")}, TypeError),
        ({"target": "", "command": Chat("x")}, ValueError),
        ({"target": "a", "command": "not a command"}, TypeError),
        ({"target": "a", "command": Attach()}, TypeError),
        ({"target": "a", "command": Chat}, TypeError),
        ({"target": "a", "command": Chat("x"), "when": True}, TypeError),
        ({"target": "a", "command": Chat("x"), "name": 3}, TypeError),
        ({"target": "a", "command": Chat("x"), "name": "  "}, ValueError),
        ({"target": "a", "command": Chat("x"), "depends_on": 5}, TypeError),
        ({"target": "a", "command": Chat("x"), "depends_on": [5]}, TypeError),
    ],
)
def test_bad_arguments_raise_typed_errors(kwargs: dict, error: type[Exception]) -> None:
    """Each argument of the wrong kind raises TypeError (or ValueError for an empty name)."""
    flow = Flow()
    target, command = kwargs.pop("target"), kwargs.pop("command")
    with pytest.raises(error):
        flow.add(target, command, **kwargs)
    assert len(flow) == 0


def test_check_refuses_a_dangling_dependency() -> None:
    """check() names the node whose dependency is not in the flow."""
    flow = Flow("f")
    flow.add("a", Chat("x"))
    flow.add("b", Chat("y"), depends_on="ghost")
    with pytest.raises(InvalidFlow) as info:
        flow.check()
    assert info.value.node == "b"
    assert "'ghost'" in str(info.value) and "not a node of the flow" in str(info.value)


def test_check_refuses_a_cycle_and_walks_it() -> None:
    """A cycle is refused naming a node on it, the message walking it dependency-first."""
    flow = Flow()
    flow.add("x", Chat("root"))
    flow.add("a", Chat("a"), depends_on=["x", "c"])
    flow.add("b", Chat("b"), depends_on="a")
    flow.add("c", Chat("c"), depends_on="b")
    flow.add("d", Chat("d"), depends_on="c")  # stuck behind the cycle, not on it
    with pytest.raises(InvalidFlow) as info:
        flow.check()
    assert info.value.node == "a"
    assert "a -> b -> c -> a" in str(info.value)


def test_check_accepts_a_diamond() -> None:
    """Diamonds and wide fan-ins are fine."""
    flow = Flow()
    flow.add("top", Chat("t"))
    for side in ("left", "right"):
        flow.add(side, Chat(side), depends_on="top")
    flow.add("bottom", Chat("b"), depends_on=["left", "right", "top"])
    flow.check()


def test_invalid_flow_pickles_with_its_fields() -> None:
    """InvalidFlow crosses a process boundary (Ray pickles errors) with node and flow."""
    error = InvalidFlow("n", "is on a cycle: n -> n", flow="f")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.node, copy.flow, str(copy)) == ("n", "f", str(error))
    node_error = pride.FlowNodeError("n", "skipped", "why")
    again = pickle.loads(pickle.dumps(node_error))
    assert (again.node, again.outcome, again.reason) == ("n", "skipped", "why")


def test_mermaid_draws_nodes_edges_and_conditions() -> None:
    """to_mermaid() draws each node with its target and command, conditional edges dotted."""
    flow = Flow()
    flow.add("researcher", Chat("find"))
    flow.add("writer", lambda up: Chat("w"), depends_on="researcher")
    flow.add("critic", Chat("c"), depends_on="writer", when=lambda up: True)
    text = flow.to_mermaid()
    assert text.splitlines() == [
        "flowchart TD",
        '    n0["researcher<br/><small>researcher · Chat</small>"]',
        '    n1["writer<br/><small>writer · ƒ</small>"]',
        '    n2["critic<br/><small>critic · Chat</small>"]',
        "    n0 --> n1",
        "    n1 -. when .-> n2",
    ]
    assert flow.to_mermaid(direction="LR").startswith("flowchart LR")
    with pytest.raises(ValueError, match="direction"):
        flow.to_mermaid(direction="sideways")


def test_mermaid_escapes_whatever_a_name_holds() -> None:
    """Quotes, brackets, entity-like text and newlines in names cannot break the diagram."""
    flow = Flow()
    flow.add("a", Chat("x"), name='say "hi" <b>#35; & ]\nbye')
    line = flow.to_mermaid().splitlines()[1]
    assert line.startswith('    n0["') and line.endswith('"]')
    inner = line[len('    n0["') : -len('"]')]
    assert '"' not in inner and "\n" not in inner and "<b>" not in inner
    assert "#35;35;" in inner  # the # of the name's own "#35;" is escaped first
