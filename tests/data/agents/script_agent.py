"""A command agent for the tests: reads the request on stdin, answers as the stub would; its argument sets its ways."""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "..", "..", "..", "backends", "stub_replies.json"), encoding="utf-8") as f:
    CANNED = json.load(f)


def on_served_tools(request, reply):
    """The reply, each call it reports made first on the tool server the request names, if it names one."""
    import urllib.request

    server = request.get("toolServer") if isinstance(request, dict) else None
    if server is not None and isinstance(reply, dict):
        for call in [*([reply["toolCall"]] if reply.get("toolCall") else []), *reply.get("toolCalls", [])]:
            body = json.dumps({"name": call["name"], "arguments": call.get("args", {})}).encode()
            sent = urllib.request.Request(server["callUrl"], body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(sent, timeout=30) as response:
                response.read()
    return reply


mode = sys.argv[1] if len(sys.argv) > 1 else "correct"
if mode == "replay":
    # The request's bytes appended to a file, one line each; the reply is the line of the replies file for that request.
    received, replies = sys.argv[2:4]
    said = sys.stdin.buffer.read()
    with open(received, "ab") as f:
        f.write(said + b"\n")
    with open(received, "rb") as f:
        number = f.read().count(b"\n")
    with open(replies, "rb") as f:
        line = f.read().split(b"\n")[number - 1]
    try:
        on_served_tools(json.loads(said), json.loads(line))
    except ValueError:
        pass  # a reply that is not JSON on purpose
    sys.stdout.buffer.write(line)
    sys.exit(0)
request = json.load(sys.stdin)
if mode == "hang":
    # A child that would outlive its parent, unless the whole process group is killed.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.environ["AGENT_CHILD_PID_FILE"], "w") as f:
        f.write(str(child.pid))
    time.sleep(60)
if mode == "background":
    # Leaves a child behind that keeps stdout and stderr open (as `sleep 60 &` in a shell script does), then answers.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.path.join(os.environ["AGENT_CHILD_PID_DIR"], str(child.pid)), "w") as f:
        f.write(str(child.pid))
    print(json.dumps({"refused": True, "text": "Left a child running."}))
    sys.exit(0)
if mode == "daemon":
    # Leaves a child in a session of its own (as a daemon does: out of reach of the command's process group) that keeps
    # stdout and stderr open, and writes to them after the command has answered and exited.
    code = "import os, sys, time; time.sleep(2); os.write(1, b'late\\n'); os.write(2, b'late\\n'); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    with open(os.path.join(os.environ["AGENT_CHILD_PID_DIR"], str(child.pid)), "w") as f:
        f.write(str(child.pid))
    print(json.dumps({"refused": True, "text": "Left a daemon running."}))
    sys.exit(0)
if mode == "crash":
    print("loading model...", file=sys.stderr)
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: no GPU", file=sys.stderr)
    sys.exit(1)
if mode == "stderr-flood":
    # One line of stderr longer than any reason shows, then a crash.
    sys.stderr.write("E" * 5_000_000 + "\n")
    sys.exit(1)
if mode == "flood":
    sys.stdout.write("x" * 10_000_000)
    sys.exit(0)
if mode == "converse":
    # One process per turn, so no state: what was said before comes in `messages`.
    messages = request["messages"]
    if len(messages) == 1:
        print(json.dumps({"text": "What should the banner show?"}))
    else:
        asked = messages[1]["content"] == "What should the banner show?"
        call = {"name": "imageman.ai.image.generate", "args": {"prompt": messages[-1]["content"]}}
        print(json.dumps(on_served_tools(request, {"toolCall": call}) if asked else {"text": "I never asked."}))
    sys.exit(0)
if mode == "scripted":
    # Its replies as its second argument says: a JSON object of task id to a list of replies, one for each turn; a
    # reply with an error, it follows by exiting with its third argument (0 when there is none).
    reply = on_served_tools(request, json.loads(sys.argv[2])[request["taskId"]][request.get("turn", 1) - 1])
    print(json.dumps(reply))
    sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 and "error" in reply else 0)
if mode == "leak":
    # Says back every secret it was told of (AGENT_LEAKS), with its arguments and its request; cut-N tasks get the
    # Nth secret where a clip cuts it: printed as output that is not JSON (N even), or to stderr before exiting 1.
    secrets = json.loads(os.environ["AGENT_LEAKS"])
    task_id = request["taskId"]
    if task_id.startswith("cut-"):
        index = int(task_id[4:])
        cut = "x" * 190 + secrets[index] + " and more after it"
        print(cut, file=sys.stderr if index % 2 else sys.stdout)
        sys.exit(index % 2)
    if task_id == "echo-refused":
        print(json.dumps({"refused": "y" * 30 + secrets[0]}))
        sys.exit(0)
    said = " ".join([*secrets, *sys.argv, json.dumps(request)])
    print(json.dumps({"refused": True, "text": f"I was given {said}"}))
    sys.exit(0)
reply = CANNED.get(request["prompt"], {"text": "unknown prompt"})
reply = dict(reply[0] if isinstance(reply, list) else reply)
if mode == "where":
    reply["text"] = json.dumps({"cwd": os.getcwd(), "request": request})
print(json.dumps(reply))
