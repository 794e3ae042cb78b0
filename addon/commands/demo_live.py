"""The demo's Gemini Live step: one voice agent's session with google-genai's live client
(`client.aio.live.connect()`), the upstream answering in the Live API's documented shapes.

Two parallel calls, one with arguments off their schema and answered with an error; a
NON_BLOCKING booking the model talks on past, answered only after the user's next question.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..harness import live

MODEL = "gemini-live-2.5-flash-preview"
DECLARATIONS = [live.WEATHER, live.BOOKING]
OSLO = ("fc_8XkzQ2mTqG1", "get_weather", {"city": "Oslo", "units": "c"})
BERGEN = ("fc_8XkzQ2mTqG2", "get_weather", {"city": "Bergen", "units": "kelvin"})
TICKET = ("fc_8XkzQ2mTqG3", "book_ticket", {"flight": "SK4021"})
SCRIPT = live.script(
    ("clientContent", [live.tool_call(OSLO, BERGEN)]),
    (
        "toolResponse",
        [
            live.text("Oslo is 4C; Bergen's reading failed. Booking SK4021 now."),
            live.tool_call(TICKET),
            live.turn_complete(412, 31),
        ],
    ),
    ("clientContent", live.answer("It is 14:05 in Oslo.", 451, 12)),
    ("toolResponse", live.answer("Your flight SK4021 is booked.", 470, 10)),
)
TURNS = 4


async def ask(session: Any, words: str) -> None:
    """The user's words, as a turn of the conversation."""
    await session.send_client_content(turns={"role": "user", "parts": [{"text": words}]})


async def until_call(session: Any) -> list[Any]:
    """The model's messages up to its calls (or the end of its turn); the calls."""
    async for message in session.receive():
        if message.tool_call:
            return list(message.tool_call.function_calls or [])
    return []


async def until_turn_complete(session: Any) -> None:
    async for _ in session.receive():
        pass


async def _session(client: Any) -> None:
    from google.genai import types  # noqa: PLC0415 - the SDKs are the demo extra

    config = {"response_modalities": ["TEXT"], "tools": [{"function_declarations": DECLARATIONS}]}
    async with client.aio.live.connect(model=MODEL, config=config) as session:
        await ask(session, "Weather in Oslo and Bergen? Then book SK4021.")
        oslo, bergen = await until_call(session)
        await session.send_tool_response(
            function_responses=[
                types.FunctionResponse(id=oslo.id, name=oslo.name, response={"temp_c": 4}),
                types.FunctionResponse(
                    id=bergen.id, name=bergen.name, response={"error": "units must be c or f"}
                ),
            ]
        )
        (ticket,) = await until_call(session)  # the booking runs while the user talks on
        await until_turn_complete(session)
        await ask(session, "Time?")
        await until_turn_complete(session)
        await session.send_tool_response(
            function_responses=types.FunctionResponse(
                id=ticket.id,
                name=ticket.name,
                response={"status": "booked"},
                scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
            )
        )
        await until_turn_complete(session)


def session(client: Any) -> None:
    """The step: one Live session through the proxy."""
    asyncio.run(_session(client))
