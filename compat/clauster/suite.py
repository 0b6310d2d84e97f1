"""clauster 1.3.2 drives a remora binary end to end, through clauster's own classes.

Run by `run` (beside this file) inside the venv it prepares; `python suite.py
--binary PATH [CASE...]` runs every case, or the named ones, and prints one
line per case with its time. Exit status 0 when every case passed.

Each case builds a fresh clauster deployment (a state dir with
`claustrum/daemon.sock`, as clauster lays it out), lets
`ClaustrumDaemon.ensure()` connect-or-spawn `remora -serve ... -token-fd 0`,
and drives it with `ClaustrumClient` and `HostedManager`/`HostedSession`
against the stream-json fake `claude` in `bin/`. A "clauster restart" is what
clauster does on one: drop its objects (`aclose`, which leaves the daemon
running) and build new ones on the same state dir. Every daemon and agent a
case started is ended by pid when it finishes, whatever the outcome.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from clauster import hosted
from clauster.claustrum_client import ClaustrumClient, DaemonUnreachable
from clauster.claustrum_daemon import ClaustrumDaemon
from clauster.config import ClausterConfig, ClaustrumConfig
from clauster.hosted import HostedManager
from clauster.hosted_state import HostedStateStore

HERE = Path(__file__).resolve().parent
FAKE_CLAUDE = HERE / "bin" / "claude"
EVENT_TIMEOUT = 10.0
# clauster waits this long after INT before KILL (5 s in clauster; shortened
# here so the escalation case stays quick, as clauster's own tests do).
STOP_GRACE = 2.0


class CaseFailed(AssertionError):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise CaseFailed(what)


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs. A zombie nobody reaped yet counts as gone, but
    only once all its threads are: the leader of a multi-threaded process
    shows `Z` while the others still exit, its descriptors (the daemon's
    listening socket) still open."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X") or threads > 1


async def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        await asyncio.sleep(0.02)
    return not pid_alive(pid)


async def eventually(what: str, predicate: Callable[[], bool], timeout: float = EVENT_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CaseFailed(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def drop_connection(daemon: ClaustrumDaemon) -> None:
    """clauster's `aclose`, after its daemon went away under it.

    `ClaustrumClient.close` awaits its reader task, and that task re-raises
    an `OSError` it met (a reset from a daemon that died with bytes of ours
    unread); clauster itself would surface it from `ensure`'s close of a
    dead connection. The connection is gone either way.
    """
    try:
        await daemon.aclose()
    except OSError:
        pass


def peer_pid(client: ClaustrumClient) -> int:
    """The daemon's pid, from the connected socket (SO_PEERCRED)."""
    sock = client._writer.get_extra_info("socket")  # noqa: SLF001 - test reads its own connection
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


class Events:
    """A subscriber queue with what it delivered so far, searchable."""

    def __init__(self, queue: asyncio.Queue[Mapping[str, Any]]) -> None:
        self.queue = queue
        self.seen: list[Mapping[str, Any]] = []

    async def until(self, what: str, predicate: Callable[[Mapping[str, Any]], bool]) -> Mapping[str, Any]:
        for event in self.seen:
            if predicate(event):
                return event
        deadline = time.monotonic() + EVENT_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CaseFailed(f"timed out waiting for {what}; saw {self.seen[-8:]}")
            try:
                event = await asyncio.wait_for(self.queue.get(), remaining)
            except TimeoutError:
                continue
            self.seen.append(event)
            if predicate(event):
                return event


def line_event(stream: str, text: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    return lambda e: e.get("type") == "line" and e.get("stream") == stream and (
        text is None or e.get("line") == text
    )


def frame_event(ftype: str, subtype: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    def match(e: Mapping[str, Any]) -> bool:
        frame = e.get("frame") if e.get("type") == "frame" else None
        return isinstance(frame, dict) and frame.get("type") == ftype and (
            subtype is None or frame.get("subtype") == subtype
        )

    return match


class Deployment:
    """One clauster deployment's state dir, and every process started in it."""

    def __init__(self, binary: str, *, keep_children: bool) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="clst-"))
        (self.dir / "projects").mkdir()
        self.config = ClausterConfig(
            projects_root=self.dir / "projects",
            state_dir=self.dir / "state",
            claustrum=ClaustrumConfig(
                enabled=True, binary=binary, keep_children=keep_children, spawn_timeout_seconds=20
            ),
        )
        self.daemon_pids: list[int] = []
        self.agent_pids: list[int] = []
        self.claustera: list[ClaustrumDaemon] = []
        self.managers: list[HostedManager] = []

    @property
    def daemon_log(self) -> str:
        path = self.dir / "state" / "claustrum" / "daemon.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    @property
    def token_path(self) -> Path:
        return self.dir / "state" / "claustrum" / "token"

    async def clauster(self) -> tuple[ClaustrumDaemon, ClaustrumClient]:
        """A clauster start: connect-or-spawn, as clauster's lifespan does."""
        daemon = ClaustrumDaemon(self.config)
        self.claustera.append(daemon)
        client = await daemon.ensure()
        pid = peer_pid(client)
        if pid not in self.daemon_pids:
            self.daemon_pids.append(pid)
        return daemon, client

    def manager(self) -> HostedManager:
        manager = HostedManager(HostedStateStore(self.dir / "state"))
        self.managers.append(manager)
        return manager

    def project_dir(self, name: str) -> Path:
        return self.dir / "projects" / name

    def project(self, name: str, **settings: Any) -> Path:
        path = self.project_dir(name)
        path.mkdir(parents=True, exist_ok=True)
        (path / "fake-claude.json").write_text(json.dumps(settings), encoding="utf-8")
        return path

    async def close(self) -> None:
        """Ends every daemon and agent of this deployment by pid, whatever
        fails on the way (the first failure is raised at the end)."""
        failures: list[BaseException] = []

        async def attempt(step: Awaitable[None]) -> None:
            try:
                await step
            except Exception as exc:  # noqa: BLE001 - keep cleaning, report after
                failures.append(exc)

        for manager in self.managers:
            for session in list(manager._sessions.values()):  # noqa: SLF001
                await attempt(session.detach())
        for daemon in self.claustera:
            await attempt(drop_connection(daemon))
        for pid in self.daemon_pids:
            await attempt(end_process(pid, group=False))
        for pid in self.agent_pids:
            await attempt(end_process(pid, group=True))
        shutil.rmtree(self.dir, ignore_errors=True)
        if failures:
            raise failures[0]


async def end_process(pid: int, *, group: bool) -> None:
    """SIGTERM then SIGKILL for a daemon; SIGKILL to an agent's group."""
    if not pid_alive(pid):
        return
    try:
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGTERM)
            if await wait_gone(pid, 5):
                return
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if not await wait_gone(pid, 5):
        raise CaseFailed(f"pid {pid} outlived SIGKILL")


# -- the cases -------------------------------------------------------------


async def connect_or_spawn_then_reconnect(dep: Deployment) -> None:
    """ensure() spawns the daemon; a restarted clauster reconnects with the persisted token."""
    first, client = await dep.clauster()
    status = first.status()
    check(status["running"] and status["error"] is None, f"first start: {status}")
    check(isinstance(status["version"], str) and status["version"], f"no version in {status}")
    daemon_pid = dep.daemon_pids[0]
    token = dep.token_path.read_text(encoding="utf-8")
    check(dep.token_path.stat().st_mode & 0o777 == 0o600, "token file is not 0600")
    await client.ping()
    await first.aclose()
    check(pid_alive(daemon_pid), "the daemon stopped when clauster dropped its connection")

    second, client2 = await dep.clauster()
    check(peer_pid(client2) == daemon_pid, "the restarted clauster started a second daemon")
    check(dep.token_path.read_text(encoding="utf-8") == token, "the persisted token changed")
    check(dep.daemon_log.count("listening on") == 1, f"daemon log:\n{dep.daemon_log}")
    check((await second.probe())["running"], "probe after reconnect")


async def capabilities_spawn_and_streams(dep: Deployment) -> None:
    """capabilities, spawn with wantPid, and stdout, stderr and exit frames."""
    _, client = await dep.clauster()
    caps = await client.capabilities()
    for method in ("process.spawn", "process.stdin", "process.kill", "process.reattach"):
        check(method in caps.get("methods", []), f"{method} missing from {caps}")
    events = Events(client.stream("p1").subscribe())
    result = await client.spawn(
        "p1", "/bin/sh", args=["-c", "echo out; echo err >&2; exit 3"], want_pid=True
    )
    check(result.get("success") is True, f"spawn: {result}")
    check(isinstance(result.get("pid"), int) and result["pid"] > 0, f"no pid in {result}")
    check(isinstance(result.get("startTime"), (int, float)), f"no startTime in {result}")
    await events.until("stdout 'out'", line_event("stdout", "out"))
    await events.until("stderr 'err'", line_event("stderr", "err"))
    exit_event = await events.until("exit", lambda e: e.get("type") == "exit")
    check(exit_event.get("exit_code") == 3, f"exit: {exit_event}")


async def long_line_and_big_stdin(dep: Deployment) -> None:
    """a 300 000-byte line across frames, and 1.5 MB of stdin in clauster's 700 000-byte chunks."""
    _, client = await dep.clauster()
    stream = client.stream("long")
    events = Events(stream.subscribe())
    await client.spawn("long", "/bin/sh", args=["-c", "head -c 300000 /dev/zero | tr '\\0' x; echo"])
    line = await events.until("the long line", line_event("stdout"))
    check(line["line"] == "x" * 300_000, f"line of {len(line['line'])} bytes")
    await events.until("exit", lambda e: e.get("type") == "exit")
    check(stream.last_seq >= 11, f"the line came in {stream.last_seq - 1} frames, expected 10 or more")

    data = os.urandom(1_500_000)
    events = Events(client.stream("sum").subscribe())
    await client.spawn("sum", "/bin/sh", args=["-c", "head -c 1500000 | sha256sum"])
    calls = []
    original = client.call

    async def counting(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        calls.append(method)
        return await original(method, params)

    client.call = counting  # type: ignore[method-assign]
    try:
        reply = await client.stdin("sum", data)
    finally:
        client.call = original  # type: ignore[method-assign]
    check(calls == ["process.stdin"] * 3, f"stdin went in {calls}")
    check(reply.get("applied") == len(data), f"last stdin reply: {reply}")
    digest = await events.until("sha256sum's line", line_event("stdout"))
    check(digest["line"].split()[0] == hashlib.sha256(data).hexdigest(), f"digest {digest}")


# Each child says "ready" once its handlers are set, then waits.
_SIGNAL_CHILD = """
import signal, sys, time
for name, code in {handlers}.items():
    signal.signal(getattr(signal, name), (lambda c: lambda *a: sys.exit(c))(code) if code else signal.SIG_IGN)
print("ready", flush=True)
time.sleep(60)
"""


async def kill_int_kill_and_default(dep: Deployment) -> None:
    """kill with INT, with KILL and with no signal (the default is TERM)."""
    _, client = await dep.clauster()
    cases = [
        ("int", "INT", {"SIGINT": 42}, 42),
        ("kill", "KILL", {"SIGINT": 0, "SIGTERM": 0}, -1),
        ("default", None, {"SIGTERM": 43}, 43),
    ]
    for pid_name, sig, handlers, expected in cases:
        events = Events(client.stream(pid_name).subscribe())
        script = _SIGNAL_CHILD.format(handlers=handlers)
        await client.spawn(pid_name, sys.executable, args=["-c", script])
        await events.until(f"{pid_name} ready", line_event("stdout", "ready"))
        reply = await client.kill(pid_name, signal=sig)
        check(reply.get("success") is True, f"kill {sig}: {reply}")
        exit_event = await events.until(f"{pid_name} exit", lambda e: e.get("type") == "exit")
        check(exit_event.get("exit_code") == expected, f"kill {sig}: {exit_event}, expected {expected}")


async def restart_then_reattach_from_zero(dep: Deployment) -> None:
    """a clauster restart, then reattach from 0 of a running and of an exited process."""
    first, client = await dep.clauster()
    running = Events(client.stream("running").subscribe())
    exited = Events(client.stream("exited").subscribe())
    await client.spawn("running", "/bin/sh", args=["-c", "echo a1; read x; echo a2"])
    await client.spawn("exited", "/bin/sh", args=["-c", "echo b1"])
    await running.until("a1", line_event("stdout", "a1"))
    await exited.until("exited's exit", lambda e: e.get("type") == "exit")
    await first.aclose()

    _, client = await dep.clauster()
    running = Events(client.stream("running").subscribe())
    reply = await client.reattach("running", 0)
    check(reply.get("found") is True and reply.get("running") is True, f"reattach running: {reply}")
    check(reply.get("firstSeq") == 1, f"reattach running: {reply}")
    await running.until("a1 replayed", line_event("stdout", "a1"))
    await client.stdin("running", b"go\n")
    await running.until("a2 live", line_event("stdout", "a2"))
    done = await running.until("running's exit", lambda e: e.get("type") == "exit")
    check(done.get("exit_code") == 0, f"running's exit {done}")

    exited = Events(client.stream("exited").subscribe())
    reply = await client.reattach("exited", 0)
    check(reply.get("found") is True and reply.get("running") is False, f"reattach exited: {reply}")
    await exited.until("b1 replayed", line_event("stdout", "b1"))
    done = await exited.until("exited's exit replayed", lambda e: e.get("type") == "exit")
    check(done.get("exit_code") == 0, f"exited's exit {done}")


async def spawn_hosted(dep: Deployment, client: Any, manager: Any, name: str, **settings: Any) -> tuple[Any, Events]:
    """Spawns the fake `claude` as clauster's hosted channel does, in project
    `name` (`settings` go to its fake), and subscribes to its session."""
    cwd = dep.project(name, **settings)
    inst = await manager.spawn(
        client, project=name, label=name, cwd=str(cwd), claude_binary=str(FAKE_CLAUDE),
        permission_mode="default",
    )
    dep.agent_pids.append(inst.agent_pid)
    return inst, Events(manager.session(inst.claustrum_process_id).subscribe())


async def hosted_lifecycle(dep: Deployment) -> None:
    """the hosted channel: MCP ack, a permission answer, a clauster restart, stop with grace and with escalation."""
    _, client = await dep.clauster()
    manager = dep.manager()
    inst, events = await spawn_hosted(dep, client, manager, "calm", on_int="exit")
    hid = inst.claustrum_process_id
    check(inst.agent_pid is not None, f"no agent pid on {inst}")
    session = manager.session(hid)
    await events.until("init frame", frame_event("system", "init"))
    ack = await events.until("MCP auto-ack", lambda e: e.get("type") == "control_ack")
    check(ack.get("subtype") == "mcp_message", f"ack {ack}")
    await events.until("the agent read the ack on stdin", frame_event("system", "mcp_acknowledged"))
    check(session.claude_session_uuid is not None, "no session uuid captured")

    await manager.send(hid, "hello")
    await events.until("assistant echo", frame_event("assistant"))
    parked = await events.until("parked permission", lambda e: e.get("type") == "control_request")
    check(parked.get("subtype") == "can_use_tool", f"parked {parked}")
    check(len(session.pending_requests) == 1, "permission request is not pending")
    await manager.respond(hid, parked["request_id"], {"behavior": "allow"})
    result = await events.until("turn result", frame_event("result"))
    check(result["frame"].get("result") == "tool allow", f"result {result}")

    # clauster restarts: it detaches, a new one reattaches every session.
    await manager.aclose()
    await dep.claustera[-1].aclose()
    _, client = await dep.clauster()
    manager = dep.manager()
    rows = await manager.reattach_all(client)
    check([r.status for r in rows] == ["running"], f"after reattach: {rows}")
    session = manager.session(hid)
    events = Events(session.subscribe())
    await manager.send(hid, "again")
    parked = await events.until(
        "second permission", lambda e: e.get("type") == "control_request" and e["request_id"] == "perm-2"
    )
    await manager.respond(hid, parked["request_id"], {"behavior": "deny", "message": "no"})
    result = await events.until("second result", lambda e: frame_event("result")(e) and e["frame"]["result"] == "tool deny")

    row = await manager.stop(hid)
    # Exit code 0: the INT ended it within the grace (a KILL reads -1).
    check(row.status == "stopped" and session.exit_code == 0, f"stop: {row.status} {session.exit_code}")
    check(await wait_gone(inst.agent_pid, 5), "the stopped agent still runs")

    # An agent that ignores INT: clauster escalates to KILL after the grace.
    inst, events = await spawn_hosted(dep, client, manager, "stubborn", on_int="ignore")
    session = manager.session(inst.claustrum_process_id)
    await events.until("stubborn's ack", frame_event("system", "mcp_acknowledged"))
    started = time.monotonic()
    row = await manager.stop(inst.claustrum_process_id)
    took = time.monotonic() - started
    check(took >= STOP_GRACE, f"escalated stop took {took:.2f}s, under the grace")
    check(session.exit_code == -1 and row.status == "crashed", f"escalated stop: {row.status} {session.exit_code}")
    check(await wait_gone(inst.agent_pid, 5), "the killed agent still runs")


# One minute of the daemon's retention clock, in ms, for the next case: the
# reference's 15 minutes last 30 ms, remora's default day 2.88 s.
RETENTION_MINUTE_MS = 2


async def session_ended_while_clauster_was_away(dep: Deployment) -> None:
    """an agent that ended while clauster was away for 100 (shortened) minutes is found, not lost."""
    # The daemon inherits this at spawn.
    os.environ["REMORA_TEST_RETENTION_MINUTE_MS"] = str(RETENTION_MINUTE_MS)
    try:
        _, client = await dep.clauster()
    finally:
        del os.environ["REMORA_TEST_RETENTION_MINUTE_MS"]
    manager = dep.manager()
    inst, events = await spawn_hosted(dep, client, manager, "away", on_int="exit")
    hid, agent = inst.claustrum_process_id, inst.agent_pid
    await events.until("ack", frame_event("system", "mcp_acknowledged"))
    await manager.aclose()
    await dep.claustera[-1].aclose()
    # clauster is down; the agent finishes (an interrupt ends it with 0).
    os.kill(agent, signal.SIGINT)
    check(await wait_gone(agent, 5), "the agent did not end")
    ended = time.monotonic()
    await asyncio.sleep(100 * RETENTION_MINUTE_MS / 1000)

    _, client = await dep.clauster()
    manager = dep.manager()
    rows = await manager.reattach_all(client)
    check(rows[0].error_detail is None, f"after 100 minutes away: {rows[0].status} {rows[0].error_detail}")
    session = manager.session(hid)
    check(session is not None, "clauster did not reattach the session")
    await eventually("the replayed exit", lambda: session.status == "stopped" and session.exit_code == 0)
    # The daemon's clock really is shortened: a day (1440 minutes) later it
    # has forgotten the process.
    deadline = time.monotonic() + 10
    while (await client.reattach(hid, 10**9)).get("found"):
        check(time.monotonic() < deadline, "the process was never dropped")
        await asyncio.sleep(0.05)
    # (`ended` was seen after the exit; a little slack for that.)
    check(time.monotonic() - ended >= 0.8 * 1440 * RETENTION_MINUTE_MS / 1000, "dropped before a day")


async def _kept_agent_across_restart(dep: Deployment, restart: Callable[[int], Awaitable[None]]) -> None:
    """Spawns a hosted agent, restarts the daemon with `restart(daemon_pid)`, reattaches."""
    _, client = await dep.clauster()
    manager = dep.manager()
    inst, events = await spawn_hosted(dep, client, manager, "kept", on_int="exit")
    hid, agent = inst.claustrum_process_id, inst.agent_pid
    await events.until("ack", frame_event("system", "mcp_acknowledged"))
    await manager.aclose()
    old_daemon = dep.daemon_pids[-1]
    await restart(old_daemon)
    check(await wait_gone(old_daemon, 10), "the old daemon is still running")
    await drop_connection(dep.claustera[-1])

    _, client = await dep.clauster()
    check(dep.daemon_pids[-1] != old_daemon, "no new daemon was started")
    manager = dep.manager()
    rows = await manager.reattach_all(client)
    row = rows[0]
    check(pid_alive(agent), f"the kept agent was ended; daemon log:\n{dep.daemon_log}")
    check(row.is_orphan, f"clauster did not find the survivor: {row.status} {row.error_detail}")
    check(row.error_detail == "survived a daemon restart — Resume to recover, or Kill", f"{row.error_detail}")
    # The agent keeps working: its heartbeat, which nobody's pipe carries
    # any more, still grows in its transcript.
    transcript = dep.project_dir("kept") / "fake-claude.out"
    beats = transcript.read_text(encoding="utf-8").count("beat ")
    await eventually("the survivor's heartbeat", lambda: transcript.read_text(encoding="utf-8").count("beat ") > beats + 2)
    row = await manager.kill_orphan(hid)
    check(row.status == "stopped", f"after kill_orphan: {row.status}")
    check(await wait_gone(agent, 5), "kill_orphan left the agent running")


async def keep_children_graceful_restart(dep: Deployment) -> None:
    """-keep-children: a graceful daemon restart leaves the hosted agent running, clauster finds it."""

    async def graceful(daemon_pid: int) -> None:
        await dep.claustera[-1].client.shutdown()

    await _kept_agent_across_restart(dep, graceful)
    check("-keep-children: leaving 1 running" in dep.daemon_log, f"daemon log:\n{dep.daemon_log}")


async def keep_children_sigkill(dep: Deployment) -> None:
    """-keep-children: kill -9 of the daemon, a new -serve, and the agent is still there."""

    async def sigkill(daemon_pid: int) -> None:
        os.kill(daemon_pid, signal.SIGKILL)

    await _kept_agent_across_restart(dep, sigkill)
    check("ending orphaned process group" not in dep.daemon_log, f"daemon log:\n{dep.daemon_log}")


async def sigkill_without_keep_children_reaps(dep: Deployment) -> None:
    """without -keep-children, the next daemon ends a SIGKILLed predecessor's agent."""
    _, client = await dep.clauster()
    manager = dep.manager()
    inst, events = await spawn_hosted(dep, client, manager, "reaped")
    await events.until("ack", frame_event("system", "mcp_acknowledged"))
    await manager.aclose()
    old_daemon = dep.daemon_pids[-1]
    os.kill(old_daemon, signal.SIGKILL)
    check(await wait_gone(old_daemon, 10), "the old daemon is still running")
    await drop_connection(dep.claustera[-1])
    _, client = await dep.clauster()
    check(await wait_gone(inst.agent_pid, 10), f"the orphan was not ended; daemon log:\n{dep.daemon_log}")
    check("ending orphaned process group" in dep.daemon_log, f"daemon log:\n{dep.daemon_log}")
    rows = await dep.manager().reattach_all(client)
    check(rows[0].error_detail == "daemon restarted; session lost", f"{rows[0].error_detail}")


async def second_clauster_takes_the_process(dep: Deployment) -> None:
    """two clausters on one daemon: a reattach from the second closes the first's connection."""
    _, client1 = await dep.clauster()
    first_events = Events(client1.stream("shared").subscribe())
    await client1.spawn("shared", "/bin/sh", args=["-c", "echo s1; read x; echo s2"])
    await first_events.until("s1", line_event("stdout", "s1"))
    _, client2 = await dep.clauster()
    events = Events(client2.stream("shared").subscribe())
    reply = await client2.reattach("shared", 0)
    check(reply.get("found") is True, f"reattach {reply}")
    await events.until("s1 replayed to the second", line_event("stdout", "s1"))
    # The first clauster is told nothing; once the daemon has dropped that
    # connection (it logs it, then closes), its next call finds it gone.
    await eventually("the daemon to drop the first connection", lambda: "reattached from another" in dep.daemon_log)
    # (A reset, when the daemon closed with the ping unread, reaches clauster
    # as the OSError its reader re-raises.)
    try:
        await client1.ping()
        raise CaseFailed("the first clauster's connection is still open")
    except (DaemonUnreachable, OSError):
        pass
    # The daemon's log names both connections (both this process here) and the process.
    me = os.getpid()
    line = (
        rf"\[Server\] closing connection @ \(connection \d+, peer pid {me}\): process shared "
        rf"reattached from another connection \(connection \d+, peer pid {me}\)"
    )
    check(re.search(line, dep.daemon_log) is not None, f"daemon log:\n{dep.daemon_log}")
    await client2.stdin("shared", b"go\n")
    await events.until("s2 to the second", line_event("stdout", "s2"))


CASES: dict[str, tuple[Callable[[Deployment], Awaitable[None]], bool]] = {
    # name: (case, keep_children)
    "connect_or_spawn_then_reconnect": (connect_or_spawn_then_reconnect, False),
    "capabilities_spawn_and_streams": (capabilities_spawn_and_streams, False),
    "long_line_and_big_stdin": (long_line_and_big_stdin, False),
    "kill_int_kill_and_default": (kill_int_kill_and_default, False),
    "restart_then_reattach_from_zero": (restart_then_reattach_from_zero, False),
    "session_ended_while_clauster_was_away": (session_ended_while_clauster_was_away, False),
    "hosted_lifecycle": (hosted_lifecycle, False),
    "keep_children_graceful_restart": (keep_children_graceful_restart, True),
    "keep_children_sigkill": (keep_children_sigkill, True),
    "sigkill_without_keep_children_reaps": (sigkill_without_keep_children_reaps, False),
    "second_clauster_takes_the_process": (second_clauster_takes_the_process, False),
}


async def run_case(name: str, binary: str) -> tuple[bool, float, str]:
    case, keep_children = CASES[name]
    dep = Deployment(binary, keep_children=keep_children)
    started = time.monotonic()
    detail = ""
    try:
        await asyncio.wait_for(case(dep), 60)
        ok = True
    except CaseFailed as exc:
        ok, detail = False, str(exc)
    except Exception:  # noqa: BLE001 - a case's crash is its failure, reported in full
        ok, detail = False, traceback.format_exc()
    took = time.monotonic() - started
    try:
        await dep.close()
    except Exception:  # noqa: BLE001 - a cleanup that fails may leave a process: report it
        ok, detail = False, detail + "\ncleanup failed:\n" + traceback.format_exc()
    return ok, took, detail


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the remora binary clauster runs")
    parser.add_argument("cases", nargs="*", help=f"cases to run (default all): {', '.join(CASES)}")
    args = parser.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    binary = str(Path(args.binary).resolve())
    # Read when a session is built, so set before any; clauster's tests do the same.
    hosted._STOP_GRACE_SECONDS = STOP_GRACE  # noqa: SLF001
    logging.basicConfig(level=logging.WARNING, format="    clauster %(levelname)s %(name)s: %(message)s")
    # The daemons (which inherit this environment, as clauster's do) get a
    # home of their own: their replay dirs land there, not in the user's
    # state dir, and the login shell a daemon asks at its first spawn reads
    # this profile rather than the user's (a slow one delays every first
    # spawn by up to 4 s). The profile puts this interpreter first on the
    # PATH that children get, for the fake `claude`'s `env python3`.
    state = tempfile.mkdtemp(prefix="clst-home-")
    Path(state, ".profile").write_text(
        f'PATH="{Path(sys.executable).parent}:$PATH"; export PATH\n', encoding="utf-8"
    )
    os.environ["HOME"] = state
    os.environ["XDG_STATE_HOME"] = state
    failed = 0
    total = time.monotonic()
    try:
        for name in args.cases or list(CASES):
            ok, took, detail = await run_case(name, binary)
            print(f"{'ok  ' if ok else 'FAIL'} {name:<38} {took:6.2f} s", flush=True)
            if not ok:
                failed += 1
                print("    " + detail.replace("\n", "\n    "), flush=True)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    count = len(args.cases or CASES)
    print(f"clauster 1.3.2 against {binary}: {count - failed} of {count} cases passed "
          f"in {time.monotonic() - total:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
