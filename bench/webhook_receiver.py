"""A webhook receiver for the webhook benches: answers every POST with 204 at once and writes
one line per request to its log: the time it arrived (ms), the event's `timestamp` (ms), the
`webhook-id`, the status it answered, the event type and the resource's id. While the file
DOWN exists (when given) it answers 503 instead: a receiver that is down.
Usage: webhook_receiver.py PORT LOG [DOWN]"""

import asyncio
import datetime
import json
import os
import sys
import time


def millis(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


async def main(port: int, log_path: str, down: str | None) -> None:
    log = open(log_path, "w", buffering=1)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.time() * 1000
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                event = json.loads(body)
                status = 503 if down and os.path.exists(down) else 204
                subject = event.get("data", {}).get("id", "")
                log.write(f"{arrived:.1f} {millis(event['timestamp']):.1f} {headers.get('webhook-id', '')}"
                          f" {status} {event['type']} {subject}\n")
                reason = b"Service Unavailable" if status == 503 else b"No Content"
                writer.write(b"HTTP/1.1 %d %s\r\ncontent-length: 0\r\n\r\n" % (status, reason))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
