"""A client of the WebSocket agent server protocol, written against the protocol's own
description, run by tests/it/sessions_api.rs against Arbor's /v1/sessions/{id}/ws.

Usage: agent_client.py <origin> <token> <session id> <text> [<review>]

Sends one user_input; answers an approval_request with <review> (YES, NO, ...); prints every
message it receives as one JSON line, then "finished". Also checks that a malformed message is
answered with an error and the connection stays open. With an empty <text> it sends nothing and
follows the run that is live in the session (resumption) to agent_finished.
"""

import asyncio
import json
import sys
import uuid

from websockets.asyncio.client import connect


async def main() -> None:
    origin, token, session, text = sys.argv[1:5]
    review = sys.argv[5] if len(sys.argv) > 5 else "YES"
    url = origin.replace("http://", "ws://", 1) + f"/v1/sessions/{session}/ws"
    async with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as ws:
        if not text:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 30))
                print(json.dumps(message), flush=True)
                if message["type"] == "agent_finished":
                    break
            print("finished", flush=True)
            return
        await ws.send(json.dumps({"id": str(uuid.uuid4()), "type": "no_such_type", "payload": {}}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 20))
        assert reply["type"] == "error", reply
        print(json.dumps(reply), flush=True)
        await ws.send(
            json.dumps(
                {
                    "id": str(uuid.uuid4()),
                    "type": "user_input",
                    "payload": {
                        "input": [
                            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
                        ]
                    },
                }
            )
        )
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 30))
            print(json.dumps(message), flush=True)
            if message["type"] == "approval_request":
                await ws.send(
                    json.dumps({"id": str(uuid.uuid4()), "type": "approval_response", "payload": {"review": review}})
                )
            if message["type"] == "agent_finished":
                break
    print("finished", flush=True)


asyncio.run(main())
