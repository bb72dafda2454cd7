"""A local Ray listens on loopback only and admits only this run's token, however ``ray`` was
imported (issue 31).

The test suite's Ray (conftest.py: a plain ``import ray``, then ``start_local_ray``) listened on
every interface with the machine's address as its node IP, while ``ctxf audit --executor ray``'s
listened on loopback: Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, at import. Here a fresh
process imports ray first, as conftest does, starts the local Ray, and reads the listening sockets
of itself and every process under it (psutil); a caller with a wrong token is refused and one with
the run's token joins; the fresh HOME holds no ``~/.ray/auth_token`` afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.integration

SCRIPT = r"""
import json, logging, os, subprocess, sys
import ray  # first, before ctxf: the import order of conftest.py
import psutil
from context_forensics.executors.ray_backend import offers_token_auth, start_local_ray

start_local_ray(ray, 1, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
ray.get(ray.remote(lambda: 1).remote())  # a worker process up, listening too
me = psutil.Process()
listening = []
for p in [me, *me.children(recursive=True)]:
    try:
        conns = p.net_connections(kind="inet")
    except psutil.Error:
        continue
    listening += [[p.name(), c.laddr.ip, c.laddr.port] for c in conns if c.status == psutil.CONN_LISTEN]
out = {"listening": listening, "node_ip": ray.util.get_node_ip_address(), "auth": offers_token_auth(), "joins": {}}
if out["auth"]:
    from ray._raylet import AuthenticationTokenLoader
    right = AuthenticationTokenLoader.instance().get_raw_token()
    addr = ray.get_runtime_context().gcs_address
    join = f"import ray; ray.init(address={addr!r}, log_to_driver=False); print('JOINED')"
    for name, token in (("wrong", "0" * 64), ("right", right)):
        env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token,
               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
        j = subprocess.Popen([sys.executable, "-c", join], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            o, e = j.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            j.kill()
            o, e = j.communicate()
        out["joins"][name] = {"joined": "JOINED" in o,
                              "refused": "Unauthenticated" in e or "token is missing or incorrect" in e}
ray.shutdown()
print(json.dumps(out))
"""


def test_a_local_ray_started_after_a_plain_import_listens_on_loopback_and_wants_its_token(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    pytest.importorskip("psutil")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("RAY_") and k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0")
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    names = {n for n, _, _ in out["listening"]}
    assert {"gcs_server", "raylet"} <= names, out["listening"]  # the sockets of Ray's own processes were read
    wide = [s for s in out["listening"] if s[1] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
    assert wide == [], wide
    assert out["node_ip"] == "127.0.0.1"
    if out["auth"]:
        assert out["joins"]["wrong"] == {"joined": False, "refused": True}, out["joins"]
        assert out["joins"]["right"]["joined"], out["joins"]
    assert not (home / ".ray").exists(), "the run's token is held in memory, never saved in ~/.ray"
