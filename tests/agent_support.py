"""Helpers for the network Memory Agent tests: a home configured for a fake model, the agent, a run."""

from __future__ import annotations

import json
import os

from writer_support import configure

from cmrunner.agentrt.agent import NetworkAgent
from cmrunner.agentrt.netclient import NetworkInputs
from cmrunner.core import config as config_mod, envfile
from cmrunner.core.home import DataPaths
from cmrunner.writer_proc.writer import Outcome, Writer

KEY_NAME = "CM_TEST_API_KEY"
TEST_KEY = "sk-test-7Qm2Xr9Lk4Vb8Nc1Zt6Hy3Wd5Pf0Gj2A"


def configure_remote(home: str, base_url: str, api: str = "responses", key: str | None = TEST_KEY,
                     private: dict[str, str] | None = None, disclosure: dict | None = None,
                     **remote: object) -> tuple[DataPaths, config_mod.Config]:
    """A home whose ``remote`` points at ``base_url``; the key (and ``private``) go into the .env."""
    paths, _ = configure(home, **(disclosure or {}))
    data = config_mod.load(home).data
    data["remote"] = {"provider": "openai-compatible", "baseUrl": base_url, "model": "fake-model",
                      "apiKeyEnv": KEY_NAME, "api": api, "proxy": {"mode": "direct"}, **remote}
    config_mod.save(home, data)
    values = dict(private or {})
    if key is not None:
        values[KEY_NAME] = key
    if values:
        envfile.update(home, values)
    return paths, config_mod.load(home)


def make_agent(cfg: config_mod.Config, process_env: dict[str, str] | None = None, **timeouts: float) -> NetworkAgent:
    """The network agent for ``cfg`` with an explicit process environment (never the test runner's)."""
    remote = cfg.remote
    assert remote is not None
    private = envfile.read(cfg.home)
    inputs = NetworkInputs.capture(remote, private, process_env or {})
    return NetworkAgent(remote, private[remote["apiKeyEnv"]], cfg.data["disclosure"], inputs, **timeouts)


def run_once(paths: DataPaths, cfg: config_mod.Config, agent: NetworkAgent) -> Outcome:
    writer = Writer(paths, cfg, agent)
    try:
        return writer.run_once()
    finally:
        writer.close()
        agent.close()


def policy(name: str = "remember_user_turns", **extra: object) -> dict:
    return {"policy": name, **extra}


def job_row(paths: DataPaths) -> tuple:
    """(state, issue, diagnostic dict or None, retries, model_turns, tool_calls, input_tokens, output_tokens)."""
    from cmrunner.core import store

    conn = store.connect(paths.db, 1000)
    try:
        row = conn.execute("SELECT state, issue, diagnostic, retries, model_turns, tool_calls, input_tokens,"
                           " output_tokens FROM jobs").fetchone()
    finally:
        conn.close()
    return (row[0], row[1], json.loads(row[2]) if row[2] else None, *row[3:])


def read_doc(paths: DataPaths, target: str) -> str | None:
    path = paths.document(target)
    return open(path, encoding="utf-8").read() if os.path.exists(path) else None


def make_test_ca(directory: str, server_names: tuple[str, ...] = ("127.0.0.1", "localhost")) -> dict[str, str]:
    """A throwaway CA and a server certificate it signed, as PEM files: ``ca``, ``cert``, ``key``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cm test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for name in server_names:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            names.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cm test server")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    os.makedirs(directory, exist_ok=True)
    files = {"ca": os.path.join(directory, "ca.pem"), "cert": os.path.join(directory, "server.pem"),
             "key": os.path.join(directory, "server.key")}
    with open(files["ca"], "wb") as handle:
        handle.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(files["cert"], "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(files["key"], "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return files
