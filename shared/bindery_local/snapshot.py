"""What every local instance starts from: the fork server imports this, then the handlers, before it forks
any instance (`bindery_local.instances`), as SnapStart snapshots an instance after its init.

An instance's first event otherwise paid its own cold start: botocore reading and parsing each service's
model from disk (a quarter of a second of JSON alone, PynamoDB's connections each in a botocore session of
its own) and the renderers' first imports. 64 callers starting 24 instances at once on two shared cores
spent their whole 20 s measuring window in those cold starts, and no export was built. Here they are paid
once, in the fork server, and every instance has them from its fork. Nothing here sends a request: clients
are made, never called, and an instance's module state is still its own copy.
"""

from __future__ import annotations

import importlib

import boto3
import botocore.loaders
import botocore.session
import pynamodb.connection.base

# Every botocore session, boto3's and each of PynamoDB's, reads the service models through this one loader,
# which keeps what it has parsed.
_models = botocore.loaders.create_loader()


def _session() -> botocore.session.Session:
    session = botocore.session.get_session()
    session.register_component("data_loader", _models)
    return session


pynamodb.connection.base.get_session = _session
boto3.setup_default_session(botocore_session=_session())
for _service in ("dynamodb", "dynamodbstreams", "s3", "sqs", "events"):
    boto3.client(_service, region_name="us-east-1", aws_access_key_id="local", aws_secret_access_key="local")

# What a handler imports on its first use of them, for the formats a build makes without typst.
for _module in (
    "bindery.engine.markup",
    "bindery.engine.figures",
    "bindery.engine.html",
    "bindery.engine.epub",
    "bindery.engine.docx",
):
    importlib.import_module(_module)
importlib.import_module("boto3.s3.transfer")
