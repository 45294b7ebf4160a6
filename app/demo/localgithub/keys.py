"""An RSA key pair for the test App, made at test time (no key material lives in the repository)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass(frozen=True)
class AppKey:
    private_pem: str = field(repr=False)
    public_pem: str


def make_app_key() -> AppKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    # GitHub hands out PKCS#1 ("BEGIN RSA PRIVATE KEY") files; use the same form
    private_pem = key.private_bytes(serialization.Encoding.PEM,
                                    serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption()).decode()
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return AppKey(private_pem, public_pem)
