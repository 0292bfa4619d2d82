"""The blob store on S3 (or an S3-compatible server), one object per blob."""

from __future__ import annotations

import os
from collections.abc import Iterable

from taskroute.storage.blobs import (
    DEFAULT_CONCURRENCY,
    BlobNotFound,
    BlobStoreError,
    Threaded,
)


class S3BlobStore(Threaded):
    """`s3://bucket/prefix` through boto3; endpoint, region and credentials come from the
    standard AWS environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_DEFAULT_REGION, ...)."""

    def __init__(self, bucket: str, prefix: str, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        super().__init__(concurrency)
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}"
        custom_endpoint = bool(
            os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        )
        config = Config(
            # one pooled connection per worker thread
            max_pool_connections=concurrency,
            retries={"max_attempts": 2, "mode": "standard"},
            # No CRC32 of every body in Python: S3 needs none for a PUT (TLS and TCP check
            # the bytes), and it was a visible share of the ingest's CPU.
            request_checksum_calculation="when_required",
            connect_timeout=3,
            read_timeout=20,
            # S3-compatible servers (MinIO, moto, ...) on a custom endpoint want path style
            s3={"addressing_style": "path" if custom_endpoint else "auto"},
        )
        # A client is thread safe; a session is not, so build the client once, here.
        self._client = boto3.session.Session().client("s3", config=config)

    def object_key(self, key: str) -> str:
        return f"{self.prefix}/{key[:2]}/{key}.json" if self.prefix else f"{key[:2]}/{key}.json"

    def _put(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=self.object_key(key),
                Body=data,
                ContentType="application/json",
            )
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"cannot write blob to {self.url}: {exc}") from exc

    async def put_many(self, blobs: Iterable[tuple[str, bytes]]) -> None:
        await self._run_all(self._put, list(blobs))

    def _get(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            obj = self._client.get_object(Bucket=self.bucket, Key=self.object_key(key))
            body: bytes = obj["Body"].read()
            return body
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobNotFound(f"no blob {key}") from exc
            raise BlobStoreError(f"cannot read blob: {exc}") from exc
        except BotoCoreError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc

    async def get(self, key: str) -> bytes:
        return await self._run(self._get, key)

    def _exists(self, key: str) -> bool:
        try:
            self._get_head(key)
        except BlobNotFound:
            return False
        return True

    def _get_head(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.head_object(Bucket=self.bucket, Key=self.object_key(key))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise BlobNotFound(f"no blob {key}") from exc
            raise BlobStoreError(f"cannot read blob: {exc}") from exc
        except BotoCoreError as exc:
            raise BlobStoreError(f"cannot read blob: {exc}") from exc

    async def exists(self, key: str) -> bool:
        return await self._run(self._exists, key)

    def _delete_objects(self, keys: list[str]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": self.object_key(k)} for k in keys], "Quiet": True},
            )
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreError(f"cannot delete blobs from {self.url}: {exc}") from exc
        # S3 answers 200 with per-key errors; a missing key is not one (deletes are idempotent)
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise BlobStoreError(
                f"cannot delete {len(errors)} blobs from {self.url}: "
                f"{first.get('Code')} {first.get('Message')}"
            )

    async def delete_many(self, keys: Iterable[str]) -> None:
        batch = list(keys)
        # DeleteObjects takes at most 1000 keys per request
        await self._run_all(
            self._delete_objects, [(batch[i : i + 1000],) for i in range(0, len(batch), 1000)]
        )

    def presigned_get_url(self, key: str, expires_in: int) -> str | None:
        # Signing is local computation (no request), so it may run on the event loop.
        url: str = self._client.generate_presigned_url(
            "get_object",
            Params={"Bucket": self.bucket, "Key": self.object_key(key)},
            ExpiresIn=expires_in,
        )
        return url
