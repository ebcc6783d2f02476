"""A webhook receiver for bench/webhooks.sh: answers every POST with 204 at once and writes
one line per request to its log: the time it arrived (ms), the event's `timestamp` (ms), and
the `webhook-id`. Usage: webhook_receiver.py PORT LOG"""

import asyncio
import datetime
import json
import sys
import time


def millis(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


async def main(port: int, log_path: str) -> None:
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
                log.write(f"{arrived:.1f} {millis(event['timestamp']):.1f} {headers.get('webhook-id', '')}\n")
                writer.write(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
