"""The EC2 error table: each code the EC2 reference lists for a launch, and botocore's own
errors, to the failure class that decides what the exchange does next."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    ReadTimeoutError,
)

from bourse.clouds.aws_errors import NO_CREDENTIALS, classify, cloud_error, instance_class, quota
from bourse.core.launch import Failure

CODES = [
    ("InsufficientInstanceCapacity", Failure.CAPACITY),
    ("InsufficientHostCapacity", Failure.CAPACITY),
    ("InsufficientCapacity", Failure.CAPACITY),
    ("InsufficientReservedInstanceCapacity", Failure.CAPACITY),
    ("UnfulfillableCapacity", Failure.CAPACITY),
    ("capacity-not-available", Failure.CAPACITY),
    ("capacity-oversubscribed", Failure.CAPACITY),
    ("SpotMaxPriceTooLow", Failure.CAPACITY),
    ("price-too-low", Failure.CAPACITY),
    ("VcpuLimitExceeded", Failure.QUOTA),
    ("InstanceLimitExceeded", Failure.QUOTA),
    ("MaxSpotInstanceCountExceeded", Failure.QUOTA),
    ("Unsupported", Failure.UNSUPPORTED),
    ("InvalidParameterValue", Failure.CONFIG),
    ("InvalidParameterCombination", Failure.CONFIG),
    ("InvalidParameter", Failure.CONFIG),
    ("MissingParameter", Failure.CONFIG),
    ("InvalidAMIID.NotFound", Failure.CONFIG),
    ("InvalidAMIID.Malformed", Failure.CONFIG),
    ("InvalidAMIID.Unavailable", Failure.CONFIG),
    ("InvalidBlockDeviceMapping", Failure.CONFIG),
    ("InvalidUserData.Malformed", Failure.CONFIG),
    ("IdempotentParameterMismatch", Failure.CONFIG),
    ("AuthFailure", Failure.AUTH),
    ("UnauthorizedOperation", Failure.AUTH),
    ("ExpiredToken", Failure.AUTH),
    ("ExpiredTokenException", Failure.AUTH),
    ("RequestExpired", Failure.AUTH),
    ("InvalidClientTokenId", Failure.AUTH),  # an Invalid* code that is not the request's
    ("SignatureDoesNotMatch", Failure.AUTH),
    ("AccessDenied", Failure.AUTH),
    ("UnrecognizedClientException", Failure.AUTH),
    ("RequestLimitExceeded", Failure.THROTTLE),
    ("Throttling", Failure.THROTTLE),
    ("ThrottlingException", Failure.THROTTLE),
    ("ServiceUnavailable", Failure.THROTTLE),
    ("InternalError", Failure.UNKNOWN),
    ("SomethingNew", Failure.UNKNOWN),
]


@pytest.mark.parametrize(("code", "failure"), CODES)
def test_each_code_has_its_class(code: str, failure: Failure) -> None:
    assert classify(code) is failure


@pytest.mark.parametrize(("instance_type", "name"), [
    ("p4d.24xlarge", "P"), ("p5.48xlarge", "P"), ("p6-b200.48xlarge", "P"),
    ("g5.xlarge", "G and VT"), ("g6e.12xlarge", "G and VT"), ("vt1.3xlarge", "G and VT"),
    ("inf2.xlarge", "Inf"), ("trn1.32xlarge", "Trn"), ("dl1.24xlarge", "DL"),
    ("f1.2xlarge", "F"), ("x2idn.16xlarge", "X"), ("hpc7g.4xlarge", "HPC"),
    ("u-6tb1.metal", "High Memory"), ("m5.large", "Standard (A, C, D, H, I, M, R, T, Z)"),
    ("t3.micro", "Standard (A, C, D, H, I, M, R, T, Z)"),
])
def test_instance_class_of_the_vcpu_quotas(instance_type: str, name: str) -> None:
    assert instance_class(instance_type) == name


def test_quota_names_the_market_and_class() -> None:
    assert quota("VcpuLimitExceeded", "g5.xlarge", spot=False) == \
        "EC2 'Running On-Demand G and VT instances' (vCPUs)"
    assert quota("MaxSpotInstanceCountExceeded", "p4d.24xlarge", spot=True) == \
        "EC2 'All P Spot Instance Requests' (vCPUs)"
    assert quota("InsufficientInstanceCapacity", "p4d.24xlarge", spot=False) is None


def _client_error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "RunInstances")


def test_a_client_error_keeps_the_clouds_code_message_and_where() -> None:
    error = cloud_error(_client_error("VcpuLimitExceeded", "You have requested more vCPU"),
                        where="us-east-1/use1-az1/p4d.24xlarge", instance_type="p4d.24xlarge")
    assert (error.failure, error.code, error.message, error.where) == (
        Failure.QUOTA, "VcpuLimitExceeded", "You have requested more vCPU",
        "us-east-1/use1-az1/p4d.24xlarge")
    assert error.quota == "EC2 'Running On-Demand P instances' (vCPUs)"


@pytest.mark.parametrize(("error", "failure"), [
    (EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com"),
     Failure.THROTTLE),
    (ConnectTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), Failure.THROTTLE),
    (ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com"), Failure.THROTTLE),
    (NoRegionError(), Failure.CONFIG),
    (ParamValidationError(report="Invalid type for parameter MinCount"), Failure.CONFIG),
])
def test_botocore_errors(error: BotoCoreError, failure: Failure) -> None:
    made = cloud_error(error, where="us-east-1")
    assert (made.failure, made.code) == (failure, type(error).__name__)
    assert made.message == str(error)


def test_no_credentials_says_where_they_come_from() -> None:
    error = cloud_error(NoCredentialsError(), where="sts:GetCallerIdentity")
    assert (error.failure, error.message) == (Failure.AUTH, NO_CREDENTIALS)
    assert "AWS_ACCESS_KEY_ID/AWS_PROFILE" in error.message
