"""template.yaml is ready to deploy: least privilege per function, a bucket that keeps no bytes the unlink
removed, queues that fit their consumers, a webhook events queue only its rule feeds, alarms, logs with
retention, and the outputs a deployer needs."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

import pytest

from bindery import outbound
from bindery.config import Settings
from bindery.states import EVENT_TYPES
from tests.infra import template
from tests.servers import ROOT

RESOURCES = template()["Resources"]
FUNCTIONS = {k: v for k, v in RESOURCES.items() if v["Type"] == "AWS::Serverless::Function"}
READS = {"dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem", "s3:GetObject"}
# Every byte Bindery keeps is under one of these two prefixes of its bucket.
S3_PREFIXES = ("artifacts/", "books/")


def _statements(props: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for policy in props.get("Policies", []) for s in policy.get("Statement", [])]


def _role_statements() -> dict[str, list[dict[str, Any]]]:
    roles = {name: _statements(f["Properties"]) for name, f in FUNCTIONS.items()}
    for name, res in RESOURCES.items():
        if res["Type"] == "AWS::IAM::Role":
            roles[name] = [s for p in res["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]
    return roles


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_there_are_the_eight_handlers_each_with_statements_of_its_own() -> None:
    assert sorted(FUNCTIONS) == [
        "BuildWorkerFunction", "ExpiryGcFunction", "PollFunction", "StaleSweepFunction", "SubmitFunction",
        "WebhookIngestFunction", "WebhookSenderFunction", "WebhookSweepFunction",
    ]  # fmt: skip
    for name, props in FUNCTIONS.items():
        assert _statements(props["Properties"]), f"{name} has no statements of its own"


@pytest.mark.parametrize("role", sorted(_role_statements()))
def test_no_role_allows_a_wildcard_action_or_resource(role: str) -> None:
    for statement in _role_statements()[role]:
        assert statement["Effect"] == "Allow"
        for action in _listed(statement["Action"]):
            assert "*" not in action, f"{role}: {action}"
        for resource in _listed(statement["Resource"]):
            assert resource != "*", f"{role}: Resource *"


def test_the_poll_role_holds_no_write_action() -> None:
    actions = [a for s in _statements(FUNCTIONS["PollFunction"]["Properties"]) for a in _listed(s["Action"])]
    assert actions and set(actions) <= READS, set(actions) - READS


# ...except where IAM has no prefix to hold it to. ListBucketMultipartUploads has no s3:prefix condition key;
# submit's ListBucket is what makes S3 answer 404 rather than 403 for a HeadObject on a missing upload.
UNPREFIXED_LISTINGS = {("ExpiryGcFunction", "FindStaleUploads"), ("SubmitFunction", "TellMissingUploads")}


@pytest.mark.parametrize("role", sorted(_role_statements()))
def test_s3_access_stays_inside_the_artifact_and_book_prefixes(role: str) -> None:
    for statement in _role_statements()[role]:
        if not any(a.startswith("s3:") for a in _listed(statement["Action"])):
            continue
        for resource in _listed(statement["Resource"]):
            if resource == {"Fn::GetAtt": "Bucket.Arn"}:  # a listing: it must be held to a prefix...
                if (role, statement["Sid"]) in UNPREFIXED_LISTINGS:
                    continue
                prefixes = statement["Condition"]["StringLike"]["s3:prefix"]
                assert all(p.startswith(S3_PREFIXES) for p in prefixes), f"{role}: {prefixes}"
                continue
            key = resource["Fn::Sub"].removeprefix("${Bucket.Arn}/")
            assert key.startswith(S3_PREFIXES), f"{role}: {resource}"


def test_the_bucket_is_private_encrypted_tls_only_unversioned_and_aborts_stale_uploads() -> None:
    bucket = RESOURCES["Bucket"]["Properties"]
    assert set(bucket["PublicAccessBlockConfiguration"].values()) == {True}
    assert len(bucket["PublicAccessBlockConfiguration"]) == 4
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    # Versioning would keep every unlinked byte as a noncurrent version.
    assert bucket.get("VersioningConfiguration", {"Status": "Suspended"})["Status"] != "Enabled"
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert any(r.get("AbortIncompleteMultipartUpload") and r["Status"] == "Enabled" for r in rules)
    [deny] = RESOURCES["BucketTlsOnly"]["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Resource"] == [{"Fn::GetAtt": "Bucket.Arn"}, {"Fn::Sub": "${Bucket.Arn}/*"}]


def test_the_queue_fits_the_worker_and_the_retry_bound() -> None:
    worker = FUNCTIONS["BuildWorkerFunction"]["Properties"]
    queue = RESOURCES["BuildQueue"]["Properties"]
    settings = Settings()
    lease = worker["Timeout"] + settings.lease_margin_seconds
    # A redelivery comes only after the lease of the attempt it replaces has run out.
    assert queue["VisibilityTimeout"] >= lease
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] > int(env["BINDERY_MAX_ATTEMPTS"])
    # The setting the graces are checked against at start is the queue's own timeout.
    assert int(env["BINDERY_BUILD_VISIBILITY_TIMEOUT_SECONDS"]) == queue["VisibilityTimeout"]
    assert Settings.from_env({k: str(v) for k, v in env.items() if isinstance(v, str | int)}) is not None
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": "BuildDeadLetterQueue.Arn"}
    assert RESOURCES["StreamToQueuePipe"]["Properties"]["Target"] == {"Fn::GetAtt": "BuildQueue.Arn"}
    assert RESOURCES["TransitionsToEventsPipe"]["Properties"]["Target"] == {"Fn::GetAtt": "EventBus.Arn"}


def _sqs_source(function: str) -> dict[str, Any]:
    (source,) = [
        e["Properties"] for e in FUNCTIONS[function]["Properties"]["Events"].values() if e["Type"] == "SQS"
    ]
    return source


def test_each_webhook_queue_fits_its_consumer_and_redrives_to_its_own_dead_letter_queue() -> None:
    default_timeout = template()["Globals"]["Function"]["Timeout"]
    dead_letters = set()
    for function, queue in (
        ("WebhookIngestFunction", "WebhookEventsQueue"),
        ("WebhookSenderFunction", "WebhookSendQueue"),
    ):
        source, props = _sqs_source(function), RESOURCES[queue]["Properties"]
        assert source["Queue"] == {"Fn::GetAtt": f"{queue}.Arn"}
        assert source["FunctionResponseTypes"] == [
            "ReportBatchItemFailures"
        ]  # one bad record alone comes back
        # A batch is redelivered only once the consumer that had it has stopped.
        assert props["VisibilityTimeout"] > FUNCTIONS[function]["Properties"].get("Timeout", default_timeout)
        assert props["SqsManagedSseEnabled"] is True
        dead_letter = props["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"].removesuffix(".Arn")
        assert RESOURCES[dead_letter]["Properties"]["SqsManagedSseEnabled"] is True
        dead_letters.add(dead_letter)
    assert dead_letters == {"WebhookEventsDeadLetterQueue", "WebhookSendDeadLetterQueue"}
    # The queue holds the only copy of an event the feed has not recorded: as long as SQS keeps anything.
    assert RESOURCES["WebhookEventsQueue"]["Properties"]["MessageRetentionPeriod"] == 14 * 86_400


def test_the_sender_has_time_for_its_whole_batch_and_a_lease_for_each_attempt() -> None:
    sender = FUNCTIONS["WebhookSenderFunction"]["Properties"]
    deadline = inspect.signature(outbound.post).parameters["deadline"].default
    batch = _sqs_source("WebhookSenderFunction")["BatchSize"]
    assert batch == 5
    # Each send in turn runs to its deadline at worst, and its claim, record and lookup need time too.
    assert sender["Timeout"] >= batch * deadline + 30
    # One attempt's lease outlives its send, so no second sender claims an attempt still in flight.
    assert Settings().webhook_lease_seconds > deadline
    sweep = FUNCTIONS["WebhookSweepFunction"]["Properties"]
    assert sweep["Events"]["EveryMinute"]["Properties"]["Schedule"] == "rate(1 minute)"
    assert sweep["Timeout"] < 60  # one run ends before the next begins


def test_only_the_webhook_rule_feeds_the_events_queue_with_every_export_event() -> None:
    rule = RESOURCES["WebhookEventsRule"]["Properties"]
    assert rule["EventBusName"] == {"Ref": "EventBus"}
    assert rule["EventPattern"] == {"source": ["bindery"], "detail-type": list(EVENT_TYPES)}
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": "WebhookEventsQueue.Arn"}
    assert "InputTransformer" not in target and "Input" not in target  # the whole envelope: ingest reads it
    assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": "WebhookEventsDeadLetterQueue.Arn"}
    policy = RESOURCES["WebhookEventsQueuePolicy"]["Properties"]
    assert policy["Queues"] == [{"Ref": "WebhookEventsQueue"}, {"Ref": "WebhookEventsDeadLetterQueue"}]
    (allow,) = policy["PolicyDocument"]["Statement"]
    assert allow["Effect"] == "Allow" and allow["Principal"] == {"Service": "events.amazonaws.com"}
    assert allow["Action"] == "sqs:SendMessage"
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": "WebhookEventsRule.Arn"}}}
    # ...and no role of the stack may send to it either.
    for role, statements in _role_statements().items():
        for statement in statements:
            for resource in _listed(statement["Resource"]):
                assert resource not in (
                    {"Fn::GetAtt": "WebhookEventsQueue.Arn"},
                    {"Fn::GetAtt": "WebhookEventsDeadLetterQueue.Arn"},
                ), role


def test_only_the_functions_that_send_keys_know_the_send_queue_and_none_allows_local_http() -> None:
    def variables(name: str) -> dict[str, Any]:
        found: dict[str, Any] = FUNCTIONS[name]["Properties"].get("Environment", {}).get("Variables", {})
        return found

    knows = {name for name in FUNCTIONS if "BINDERY_WEBHOOK_SEND_QUEUE_URL" in variables(name)}
    assert knows == {"WebhookIngestFunction", "WebhookSweepFunction"}
    for name in knows:
        assert variables(name)["BINDERY_WEBHOOK_SEND_QUEUE_URL"] == {"Ref": "WebhookSendQueue"}
    globals_ = template()["Globals"]["Function"]["Environment"]["Variables"]
    # http to 127.0.0.1 is the local stack's alone: a deployment that set it would call its own loopback.
    assert all("BINDERY_WEBHOOK_LOCAL_HTTP" not in v for v in [globals_, *map(variables, FUNCTIONS)])


def test_the_jwt_authorizer_takes_its_issuer_and_audience_as_parameters() -> None:
    jwt = RESOURCES["Api"]["Properties"]["Auth"]["Authorizers"]["Jwt"]["JwtConfiguration"]
    assert jwt == {"issuer": {"Ref": "JwtIssuer"}, "audience": [{"Ref": "JwtAudience"}]}
    assert {"JwtIssuer", "JwtAudience"} <= set(template()["Parameters"])


def test_each_alarm_watches_what_the_runbook_names() -> None:
    alarms = {k: v["Properties"] for k, v in RESOURCES.items() if v["Type"] == "AWS::CloudWatch::Alarm"}

    def metric(props: dict[str, Any]) -> Any:
        stats = [
            m["MetricStat"]["Metric"]["MetricName"] for m in props.get("Metrics", []) if "MetricStat" in m
        ]
        return props.get("MetricName") or set(stats)

    watched = {name: metric(props) for name, props in alarms.items()}
    assert watched == {
        "DeadLetterQueueAlarm": "ApproximateNumberOfMessagesVisible",
        "UnlinkFailuresAlarm": "UnlinksFailed",
        "StaleExportsAlarm": {"StaleSwept_worker_lost", "StaleSwept_queue_timeout"},
        "Api5xxAlarm": "5xx",
        "WorkerErrorsAlarm": "Errors",
        "GcErrorsAlarm": "Errors",
        "SweepErrorsAlarm": "Errors",
        "EventsDeadLetterAlarm": "ApproximateNumberOfMessagesVisible",
        "WebhookIngestErrorsAlarm": "Errors",
        "WebhookSenderErrorsAlarm": "Errors",
        "WebhookSweepErrorsAlarm": "Errors",
        "WebhookEventsDeadLetterAlarm": "ApproximateNumberOfMessagesVisible",
        "WebhookSendDeadLetterAlarm": "ApproximateNumberOfMessagesVisible",
        "DeliveriesExpiredAlarm": "WebhookDeliveriesExpired",
    }
    runbook = (ROOT / "docs" / "OPERATIONS.md").read_text()
    for props in alarms.values():
        assert props["AlarmActions"] == [{"Ref": "AlarmTopic"}]
        section = props["AlarmDescription"].split('Runbook, "')[1].split('"')[0]
        assert f"## {section}" in runbook, section


def test_every_alarm_can_reach_the_topic_through_its_key_and_its_policy() -> None:
    # CloudWatch publishes to an encrypted topic only if the key's policy lets cloudwatch.amazonaws.com use
    # it (an AWS-managed key cannot) and the topic's policy lets it publish, for this account's alarms.
    topic = RESOURCES["AlarmTopic"]["Properties"]
    assert topic["KmsMasterKeyId"] == {"Ref": "AlarmKey"}
    key = RESOURCES["AlarmKey"]["Properties"]
    assert key["EnableKeyRotation"] is True
    by_cloudwatch = [
        st
        for st in key["KeyPolicy"]["Statement"]
        if st["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert len(by_cloudwatch) == 1
    assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(_listed(by_cloudwatch[0]["Action"]))
    policy = RESOURCES["AlarmTopicPolicy"]["Properties"]
    assert policy["Topics"] == [{"Ref": "AlarmTopic"}]
    (publish,) = policy["PolicyDocument"]["Statement"]
    assert (
        publish["Principal"] == {"Service": "cloudwatch.amazonaws.com"} and publish["Action"] == "sns:Publish"
    )
    source = publish["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    assert source.endswith(":cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*")
    alarms = [v["Properties"] for v in RESOURCES.values() if v["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms and all(a["AlarmActions"] == [{"Ref": "AlarmTopic"}] for a in alarms)


def test_every_function_and_sweep_has_an_errors_alarm_and_every_dead_letter_queue_one() -> None:
    alarms = [v["Properties"] for v in RESOURCES.values() if v["Type"] == "AWS::CloudWatch::Alarm"]
    errors = {a["Dimensions"][0]["Value"]["Ref"] for a in alarms if a.get("MetricName") == "Errors"}
    assert errors == {
        "BuildWorkerFunction", "ExpiryGcFunction", "StaleSweepFunction",
        "WebhookIngestFunction", "WebhookSenderFunction", "WebhookSweepFunction",
    }  # fmt: skip
    queues = {
        a["Dimensions"][0]["Value"]["Fn::GetAtt"].split(".")[0]
        for a in alarms
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    dead_letters = {k for k, v in RESOURCES.items() if v["Type"] == "AWS::SQS::Queue" and "DeadLetter" in k}
    assert queues == dead_letters == {
        "BuildDeadLetterQueue", "EventsDeadLetterQueue",
        "WebhookEventsDeadLetterQueue", "WebhookSendDeadLetterQueue",
    }  # fmt: skip
    events = RESOURCES["TransitionsToEventsPipe"]["Properties"]["SourceParameters"][
        "DynamoDBStreamParameters"
    ]
    assert events["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": "EventsDeadLetterQueue.Arn"}


def test_the_edge_limits_callers_and_logs_no_credential() -> None:
    api = RESOURCES["Api"]["Properties"]
    default = api["DefaultRouteSettings"]
    assert (
        default["ThrottlingRateLimit"] > 0
        and default["ThrottlingBurstLimit"] >= default["ThrottlingRateLimit"]
    )
    manuscript = api["RouteSettings"]["PUT /books/{bookId}/manuscript"]
    assert manuscript["ThrottlingRateLimit"] < default["ThrottlingRateLimit"]
    routes = {f"{e['Properties']['Method']} {e['Properties']['Path']}" for f in FUNCTIONS.values()
              for e in f["Properties"].get("Events", {}).values() if e["Type"] == "HttpApi"}  # fmt: skip
    assert set(api["RouteSettings"]) <= routes  # a throttle on a route that does not exist holds nothing
    access = api["AccessLogSettings"]
    assert access["DestinationArn"] == {"Fn::GetAtt": "ApiAccessLogs.Arn"}
    fields = json.loads(access["Format"])
    assert {"requestId", "route", "status", "latencyMs"} <= set(fields)
    assert not any("header" in v.lower() or "authorization" in v.lower() for v in fields.values())
    assert RESOURCES["ApiAccessLogs"]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
    submit = FUNCTIONS["SubmitFunction"]["Properties"]["ReservedConcurrentExecutions"]
    assert submit == {
        "Fn::If": ["ReserveSubmit", {"Ref": "SubmitReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
    }
    builds = FUNCTIONS["BuildWorkerFunction"]["Properties"]["Events"]["Builds"]["Properties"]
    assert builds["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "WorkerMaxConcurrency"}
    for function, cap in (("WebhookIngestFunction", "WebhookIngestMaxConcurrency"),
                          ("WebhookSenderFunction", "WebhookSenderMaxConcurrency")):  # fmt: skip
        assert _sqs_source(function)["ScalingConfig"]["MaximumConcurrency"] == {"Ref": cap}
        assert template()["Parameters"][cap]["MinValue"] >= 2  # what an SQS event source takes


def test_only_the_events_pipe_puts_events_and_the_build_queue_holds_only_keys() -> None:
    policy = RESOURCES["EventBusPutOnlyByPipe"]["Properties"]
    assert policy["EventBusName"] == {"Ref": "EventBus"}
    deny = policy["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "events:PutEvents"
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": {"Fn::GetAtt": "EventsPipeRole.Arn"}}}
    forwarded = RESOURCES["StreamToQueuePipe"]["Properties"]["TargetParameters"]["InputTemplate"]
    assert re.findall(r"<\$\.([^>]+)>", forwarded) == ["dynamodb.Keys.pk.S", "dynamodb.Keys.sk.S"]
    assert RESOURCES["Table"]["Properties"]["DeletionProtectionEnabled"] is True


def test_every_function_logs_to_a_group_with_retention() -> None:
    groups = {
        v["Properties"]["LogGroupName"]["Fn::Sub"]: v["Properties"]
        for v in RESOURCES.values()
        if v["Type"] == "AWS::Logs::LogGroup" and "LogGroupName" in v["Properties"]
    }
    for name in FUNCTIONS:
        assert groups[f"/aws/lambda/${{{name}}}"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_the_outputs_name_the_api_the_table_and_the_bucket() -> None:
    assert {"ApiUrl", "TableName", "BucketName", "EventBusName", "AlarmTopicArn"} <= set(
        template()["Outputs"]
    )
    # The runbook's redrives start from these.
    assert {"WebhookEventsDeadLetterQueueUrl", "WebhookSendDeadLetterQueueUrl"} <= set(template()["Outputs"])
