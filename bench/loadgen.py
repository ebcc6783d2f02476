"""What the load generators of bench/ share: one request on a kept-alive connection, and
worker threads run to their end."""

import http.client
import threading


def send(url, connection, method, target, body, headers, timeout=15):
    """Sends one request on `connection` (opened to `url` when None) and reads the answer.
    Returns `(connection, status, body)`: status 0 and body None when no HTTP answer came
    (refused, reset, timed out), and the connection None whenever it must be opened again."""
    try:
        if connection is None:
            connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read()
        if response.getheader("connection", "").lower() == "close":
            connection.close()
            connection = None
        return connection, response.status, data
    except (OSError, http.client.HTTPException):
        if connection is not None:
            connection.close()
        return None, 0, None


def run_workers(count, worker):
    """Runs `worker(n)` for n in 0..count, each on its own thread, and waits for them all."""
    workers = [threading.Thread(target=worker, args=(n,)) for n in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
