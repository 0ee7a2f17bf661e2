"""The compiler knows the literal signal names a workflow awaits (``WorkflowFunction.signal_names``)."""

from __future__ import annotations

from workflows._compiler import compile_workflow_source

HEADER = "from workflows import gather, select, signal, subscribe, timer, spawn, procedure\n"


def _compile(body: str, name: str, globals_: dict | None = None):
    return compile_workflow_source(HEADER + body, f"{name}.py", name, globals_)


def test_literal_names_in_signal_select_gather_and_subscribe():
    """Every literal name: awaited alone, as a select or gather arm, in a loop, or subscribed."""
    wf = _compile(
        "async def shop(x):\n"
        "    subscribe('sale', 'eu')\n"
        "    a = await signal('pay')\n"
        "    while True:\n"
        "        e = await select(timer('end', 5), signal('bid'), signal(name='cancel'))\n"
        "        if e.name == 'end':\n"
        "            break\n"
        "    return await gather(signal('ack'), timer('t', 1))\n",
        "names_shop",
    )
    assert wf.signal_names == frozenset({"sale", "pay", "bid", "cancel", "ack"})


def test_a_name_that_is_not_a_literal_makes_them_unknown():
    """signal(name) with a variable: the names cannot be told, so the set is None (no warnings)."""
    wf = _compile("async def relay(name):\n    return await signal(name)\n", "names_relay")
    assert wf.signal_names is None


def test_workflows_awaited_inline_add_their_names():
    """`await helper(x)` runs the helper inline: its names are the caller's too, recursion included."""
    g: dict = {}
    helper = compile_workflow_source(
        HEADER + "async def helper(x):\n    return await signal('confirm')\n", "names_helper.py", "names_helper", g
    )
    g["helper"] = helper
    caller = compile_workflow_source(
        HEADER + "async def caller():\n    await signal('go')\n    return await helper(1)\n",
        "names_caller.py", "names_caller", g,
    )
    assert caller.signal_names == frozenset({"go", "confirm"})
    looping = compile_workflow_source(
        HEADER + "async def looping(n):\n    await signal('tick')\n    if n:\n        return await looping(n - 1)\n",
        "names_looping.py", "names_looping", g,
    )
    g["looping"] = looping
    assert looping.signal_names == frozenset({"tick"})


def test_no_signals_is_an_empty_set():
    """A workflow that awaits only procedures and timers awaits no signal at all."""
    wf = _compile("async def quiet():\n    await timer('t', 1)\n    return 1\n", "names_quiet")
    assert wf.signal_names == frozenset()


def test_names_read_from_source_without_running_it():
    """names_in_source reads a module's text (as `wf signal` does, running none of its code):
    the names of one workflow and of the workflows of the same module it awaits inline; a name
    imported from elsewhere, or a function the module does not define, makes them unknown."""
    from workflows._compiler._signals import names_in_source

    source = (
        "import os\n"
        "os.exit_if_imported()\n"  # never runs: the text is only parsed
        "from shop import remote\n"
        "@workflow\nasync def helper():\n    return await signal('confirm')\n"
        "@workflow\nasync def buyer():\n    await select(signal('pay'), timer('t', 5))\n    return await helper()\n"
        "@workflow\nasync def delegates():\n    await signal('go')\n    return await remote()\n"
    )
    assert names_in_source(source, "buyer") == frozenset({"pay", "confirm"})
    assert names_in_source(source, "helper") == frozenset({"confirm"})
    assert names_in_source(source, "delegates") is None
    assert names_in_source(source, "missing") is None
    assert names_in_source("def broken(:\n", "x") is None


class _Finalized:
    """Garbage whose finalizer runs Python code, so a collection can switch threads midway."""

    def __del__(self) -> None:
        for _ in range(50):
            pass


def test_names_are_read_and_workflows_compiled_by_two_threads_at_once():
    """``wf signal`` reads a workflow's signal names from its source while the system's threads
    import and compile workflows: on CPython 3.11 two conversions of syntax trees at once, with a
    collection switching threads midway, failed with ``SystemError: AST constructor recursion
    depth mismatch`` (the counter is per interpreter). Each now waits for the other."""
    import threading

    from workflows._compiler._signals import names_in_source

    source = HEADER + "".join(
        f"async def w{i}(x):\n    a = await signal('s{i}')\n    return await timer('t', a)\n"
        for i in range(40)
    )
    failures: list[BaseException] = []

    def read() -> None:
        for _ in range(60):
            garbage = [_Finalized() for _ in range(50)]
            for g in garbage:
                g.me = g  # type: ignore[attr-defined]  (a cycle: freed by a collection)
            del garbage
            try:
                assert names_in_source(source, "w7") == frozenset({"s7"})
                _compile("async def c(x):\n    return await signal('go')\n", "names_c")
            except BaseException as e:  # noqa: BLE001 - reported by the test's thread
                failures.append(e)
                return

    threads = [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert failures == []
