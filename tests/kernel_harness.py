"""A real ipykernel driven the way JupyterLab drives it: execute, interrupt, comm messages.

The kernel runs from this test venv (jupyter_client swaps ``python`` for
``sys.executable``). Every iopub message is recorded; widget state is tracked from
``comm_open`` and ``comm_msg`` updates so tests can read what a browser would show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.manager import AsyncKernelManager


@dataclass
class Execution:
    msg_id: str
    reply: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str | None:
        return self.reply["content"]["status"] if self.reply else None

    @property
    def stdout(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.messages
            if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"
        )

    @property
    def stderr(self) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.messages
            if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
        )

    def texts(self) -> list[str]:
        """``text/plain`` of every display and result, in order."""
        out = []
        for m in self.messages:
            if m["msg_type"] in ("display_data", "execute_result", "update_display_data"):
                out.append(m["content"]["data"].get("text/plain", ""))
        return out

    @property
    def error(self) -> dict[str, Any] | None:
        for m in self.messages:
            if m["msg_type"] == "error":
                return m["content"]
        return None


class Kernel:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.km = AsyncKernelManager(kernel_name="python3")
        self.env = env or {}
        self.iopub: list[dict[str, Any]] = []
        self.executions: dict[str, Execution] = {}
        self.widgets: dict[str, dict[str, Any]] = {}  # comm_id -> state
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None

    async def start(self) -> Kernel:
        # scripted answers from the environment (an unattended notebook run) are not for these kernels
        inherited = {name: value for name, value in os.environ.items() if name != "FUSION_NB_ANSWERS"}
        env = {**inherited, "PYDEVD_DISABLE_FILE_VALIDATION": "1", **self.env}
        await self.km.start_kernel(env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(timeout=60)
        self._reader = asyncio.create_task(self._read_iopub())
        self._shell_reader = asyncio.create_task(self._read_shell())
        return self

    async def stop(self) -> None:
        for task in (self._reader, self._shell_reader):
            if task:
                task.cancel()
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)

    async def _read_iopub(self) -> None:
        while True:
            msg = await self.kc.get_iopub_msg()
            self.iopub.append(msg)
            parent = msg.get("parent_header", {}).get("msg_id")
            if parent in self.executions:
                self.executions[parent].messages.append(msg)
            self._track_widget(msg)
            self._changed.set()

    async def _read_shell(self) -> None:
        while True:
            msg = await self.kc.get_shell_msg()
            parent = msg.get("parent_header", {}).get("msg_id")
            if parent in self.executions:
                self.executions[parent].reply = msg
            self._changed.set()

    def _track_widget(self, msg: dict[str, Any]) -> None:
        content = msg["content"]
        if msg["msg_type"] == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.widgets[content["comm_id"]] = dict(content["data"]["state"])
        elif msg["msg_type"] == "comm_msg" and content["comm_id"] in self.widgets:
            data = content["data"]
            if data.get("method") in ("update", "echo_update"):
                self.widgets[content["comm_id"]].update(data.get("state", {}))

    async def wait_until(self, predicate, timeout: float = 30, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"timed out waiting for {what}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):  # re-check the predicate at least twice a second
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))

    def submit(self, code: str, store_history: bool = True) -> Execution:
        msg_id = self.kc.execute(code, store_history=store_history, allow_stdin=False)
        execution = self.executions[msg_id] = Execution(msg_id)
        return execution

    async def finished(self, execution: Execution, timeout: float = 60) -> Execution:
        def idle() -> bool:
            return execution.reply is not None and any(
                m["msg_type"] == "status" and m["content"]["execution_state"] == "idle" for m in execution.messages
            )

        await self.wait_until(idle, timeout, f"cell {execution.msg_id} to finish")
        return execution

    async def run(self, code: str, timeout: float = 60, ok: bool = True) -> Execution:
        execution = await self.finished(self.submit(code), timeout)
        if ok and execution.status != "ok":
            raise AssertionError(f"cell failed: {execution.error}\n{execution.stderr}")
        return execution

    async def interrupt(self) -> None:
        await self.km.interrupt_kernel()

    def find_widgets(self, model_name: str, **state: Any) -> list[str]:
        return [
            cid
            for cid, s in self.widgets.items()
            if s.get("_model_name") == model_name and all(s.get(k) == v for k, v in state.items())
        ]

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> str:
        """Send a ``comm_msg`` as a front end does; returns its ``msg_id``."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def click(self, comm_id: str) -> str:
        return self.send_comm(comm_id, {"method": "custom", "content": {"event": "click"}})

    def set_value(self, comm_id: str, **state: Any) -> str:
        return self.send_comm(comm_id, {"method": "update", "state": state, "buffer_paths": []})

    def statuses(self, msg_id: str) -> list[str]:
        """The ``execution_state`` of every status message whose parent is ``msg_id``, in order."""
        return [
            m["content"]["execution_state"]
            for m in self.iopub
            if m["msg_type"] == "status" and m.get("parent_header", {}).get("msg_id") == msg_id
        ]

    async def type_into(self, comm_id: str, text: str) -> None:
        """Type ``text`` a key at a time, as ipywidgets' front end sends it.

        The front end holds a model's next update until the kernel reports ``idle`` for the
        previous one (its message throttle), so each keystroke waits for that status.
        """
        for end in range(1, len(text) + 1):
            sent = self.set_value(comm_id, value=text[:end])
            await self.wait_until(lambda sent=sent: "idle" in self.statuses(sent), 10, f"idle after {text[:end]!r}")


async def serve_shout(kernel: Kernel) -> tuple[Execution, str, str]:
    """Define a ``shout`` tool (one progress value, then the upper-cased text) and ``%fusion serve`` it.

    Returns the serve cell's execution, the MCP endpoint and the bearer token it printed.
    """
    await kernel.run("%load_ext fusion_nb\nimport anyio")
    await kernel.run(
        '%%fusion_tool f.query("shout").with_string("text")\n"""Upper-case a text."""\n'
        'yield progress(50, "half")\nawait anyio.sleep(0)\nreturn input.text.upper()'
    )
    served = await kernel.run("%fusion serve")
    url = re.search(r"MCP endpoint: (\S+)", served.stdout)
    token = re.search(r"Bearer token: (\S+)", served.stdout)
    assert url is not None and token is not None, served.stdout
    return served, url.group(1), token.group(1)
