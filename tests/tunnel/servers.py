"""What the test jobs run: an HTTP server (files of its cwd, and /echo answering what it
received) and a WebSocket echo server that first sends the path it was opened on."""

SERVERS = r'''
import asyncio, http.server, json, sys, threading
from websockets.asyncio.server import serve

http_port, ws_port = int(sys.argv[1]), int(sys.argv[2])
open("hello.txt", "w").write("hello from the job\n")


class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if not self.path.startswith("/echo"):
            return super().do_GET()
        self._answer(b"")

    def do_POST(self):
        self._answer(self.rfile.read(int(self.headers.get("content-length", 0))))

    def _answer(self, body):
        reply = json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                            "body": len(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.send_header("Set-Cookie", "bourse_session=stolen; Path=/")
        self.send_header("Set-Cookie", "app=1; Path=/")
        self.end_headers()
        self.wfile.write(reply)


server = http.server.ThreadingHTTPServer(("127.0.0.1", http_port), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()


async def echo(ws):
    await ws.send(ws.request.path)
    async for message in ws:
        await ws.send(message)


async def main():
    async with serve(echo, "127.0.0.1", ws_port, max_size=None):
        print("ready", flush=True)
        await asyncio.Future()

asyncio.run(main())
'''
