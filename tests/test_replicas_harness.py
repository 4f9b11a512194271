"""The replica harness (``standins.replicas``): the nginx config it renders, and two Telegram
replicas plus one WhatsApp replica on PostgreSQL behind nginx answering webhooks, one of them
SIGKILLed."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from standins import whatsapp
from standins.replicas import ReplicaSet, find_nginx, render_nginx_conf
from standins.telegram import FakeTelegram, parse_html
from tests.conftest import needs_tools

WA_SECRET = "app-secret"


def test_nginx_conf_has_an_upstream_per_channel_and_retries_a_dead_replica():
    conf = render_nginx_conf(listen="127.0.0.1:8080",
                             telegram_servers=["127.0.0.1:8001", "127.0.0.1:8002"],
                             whatsapp_servers=["127.0.0.1:8003"], balance="round_robin")
    telegram = re.search(r"upstream telegram_replicas \{(.*?)\}", conf, re.S).group(1)
    assert "127.0.0.1:8001" in telegram and "127.0.0.1:8002" in telegram
    assert "least_conn" not in conf
    assert "location = /telegram" in conf and "location = /whatsapp" in conf
    assert "proxy_next_upstream error timeout" in conf and "non_idempotent" in conf


def test_nginx_conf_leaves_out_a_channel_without_replicas():
    conf = render_nginx_conf(listen="443 ssl", telegram_servers=["10.0.0.5:8443"],
                             ssl_certificate="/etc/ssl/bot.pem",
                             ssl_certificate_key="/etc/ssl/bot.key")
    assert "whatsapp" not in conf and "least_conn;" in conf
    assert "ssl_certificate_key /etc/ssl/bot.key;" in conf
    with pytest.raises(ValueError, match="no replicas"):
        render_nginx_conf(listen="8080")


def test_nginx_conf_serves_the_web_page_from_its_replicas_at_the_root():
    conf = render_nginx_conf(listen="127.0.0.1:8080", web_servers=["127.0.0.1:8004",
                                                                   "127.0.0.1:8005"])
    web = re.search(r"upstream web_replicas \{(.*?)\}", conf, re.S).group(1)
    assert "127.0.0.1:8004" in web and "127.0.0.1:8005" in web
    root = re.search(r"location / \{(.*?)\}", conf, re.S).group(1)
    assert "proxy_pass http://web_replicas;" in root
    assert "client_max_body_size 6m;" in root and "proxy_read_timeout 100s;" in root
    assert "sticky" not in conf and "ip_hash" not in conf and "telegram" not in conf
    without = render_nginx_conf(listen="127.0.0.1:8080", telegram_servers=["127.0.0.1:8001"])
    assert "web_replicas" not in without and "return 404;" in without


@needs_tools("nginx")
def test_nginx_accepts_the_rendered_conf(tmp_path):
    for folder in ("logs", "temp"):  # nginx makes temp/* itself, not these
        (tmp_path / folder).mkdir()
    (tmp_path / "nginx.conf").write_text(render_nginx_conf(
        listen="127.0.0.1:8080", telegram_servers=["127.0.0.1:8001"],
        whatsapp_servers=["127.0.0.1:8002"], web_servers=["127.0.0.1:8003"]))
    check = subprocess.run([find_nginx(), "-t", "-p", str(tmp_path), "-e",
                            str(tmp_path / "logs" / "error.log"), "-c",
                            str(tmp_path / "nginx.conf")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


@pytest.mark.slow
@needs_tools("espeak-ng", "ffmpeg", "nginx")
async def test_replicas_behind_nginx_answer_webhooks_and_survive_a_sigkill(
        tmp_path, pg_url, sample_index_dir):
    async with FakeTelegram() as tg, whatsapp.FakeGraph() as graph:
        env = {"TELEGRAM_TOKEN": tg.token, "TELEGRAM_API_BASE": tg.base_url,
               "TELEGRAM_FILE_BASE": tg.base_file_url,
               "VOICE_RAG_INDEX_DIR": str(sample_index_dir), "SARVAM_API_KEY": "unused",
               "BOT_RATE_LIMIT_N": "0", "BOT_REPEAT_WINDOW_S": "0",
               "WHATSAPP_TOKEN": graph.token, "WHATSAPP_PHONE_NUMBER_ID": graph.phone_number_id,
               "WHATSAPP_APP_SECRET": WA_SECRET, "WHATSAPP_VERIFY_TOKEN": "v",
               "WHATSAPP_API_BASE": graph.url, "WHATSAPP_API_VERSION": graph.version}
        async with ReplicaSet(n_telegram=2, n_whatsapp=1, database_url=pg_url, env=env,
                              work_dir=tmp_path / "rs", balance="round_robin") as replicas:
            assert len(set(replicas.pids)) == 3 and len(set(replicas.ports)) == 3
            assert tg.webhook["url"] == replicas.telegram_webhook_url
            for n in range(4):
                await tg.push_text(100 + n, "/help")
            replies = await tg.wait_for("sendMessage", 4, timeout=60)
            assert all("Ask me a question" in parse_html(c.text) for c in replies)
            access = (replicas.nginx_dir / "logs" / "access.log").read_text()
            upstreams = set(re.findall(r"POST /telegram \S+ 200 \d+ upstream=(\S+)", access))
            assert upstreams == {f"127.0.0.1:{r.port}" for r in replicas.telegram}

            body = whatsapp.encode(whatsapp.text_message("919800000001", "help"))
            async with httpx.AsyncClient() as client:
                response = await client.post(
                    replicas.whatsapp_webhook_url, content=body,
                    headers={"Content-Type": "application/json",
                             "X-Hub-Signature-256": whatsapp.sign(body, WA_SECRET)})
            assert response.status_code == 200
            [sent] = await graph.wait_for(1, timeout=60)
            assert sent.body["to"] == "919800000001"

            memory = replicas.telegram[1].memory()
            assert 0 < memory.pss_kib <= memory.rss_kib

            assert await replicas.kill(0) == -9
            assert not replicas.telegram[0].is_alive
            for n in range(4):
                await tg.push_text(200 + n, "/help")
            replies = await tg.wait_for("sendMessage", 4, timeout=60)
            assert {c.chat_id for c in replies} == {200, 201, 202, 203}
            await replicas.restart(0)
            await tg.push_text(300, "/help")
            [reply] = await tg.wait_for("sendMessage", 1, timeout=60)
            assert reply.chat_id == 300
