"""What an EC2 error means for the exchange: a table from the cloud's error code to a
:class:`~bourse.core.launch.Failure`, and the quota a quota error is about.

Pure: no calls, only the codes of the EC2 API reference ("Error codes for the Amazon EC2 API")
and of botocore's own exceptions. Decisions the reference leaves open:

- ``SpotMaxPriceTooLow`` is CAPACITY: the spot price of that zone is above the bid, and the
  bid is the job's own ceiling, so another zone (or on demand) may do; the zone is blocked for
  the capacity TTL like a shortage.
- Connection errors and timeouts are THROTTLE (back off, retry the same place): the request
  may have reached EC2 (a read timeout), and only a retry with the same client token is sure to
  get that instance back instead of launching a second one elsewhere.
- ``InternalError``/``InternalFailure`` are UNKNOWN: fail over with a short block (the same
  place may keep failing; the reconciler finds an instance the failed call made after all).
- Any other ``Invalid*`` code is CONFIG (a request EC2 will refuse anywhere); any code not in
  the table is UNKNOWN.
"""

from __future__ import annotations

import re

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
)

from bourse.clouds.base import CloudError
from bourse.core.launch import Failure

NO_CREDENTIALS = ("no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_PROFILE or run on an "
                  "instance role)")

_CODES: dict[str, Failure] = {
    # capacity: another zone, type or market may have it
    "InsufficientInstanceCapacity": Failure.CAPACITY,
    "InsufficientHostCapacity": Failure.CAPACITY,
    "InsufficientCapacity": Failure.CAPACITY,
    "InsufficientReservedInstanceCapacity": Failure.CAPACITY,
    "UnfulfillableCapacity": Failure.CAPACITY,
    "SpotMaxPriceTooLow": Failure.CAPACITY,
    # spot request status codes (a spot request's fault, not a ClientError of RunInstances)
    "capacity-not-available": Failure.CAPACITY,
    "capacity-oversubscribed": Failure.CAPACITY,
    "price-too-low": Failure.CAPACITY,
    # quota: the account's limit for the region and instance class
    "VcpuLimitExceeded": Failure.QUOTA,
    "InstanceLimitExceeded": Failure.QUOTA,
    "MaxSpotInstanceCountExceeded": Failure.QUOTA,
    # the type is not offered there
    "Unsupported": Failure.UNSUPPORTED,
    # the request itself: fails everywhere alike
    "InvalidParameterValue": Failure.CONFIG,
    "InvalidParameterCombination": Failure.CONFIG,
    "InvalidParameter": Failure.CONFIG,
    "MissingParameter": Failure.CONFIG,
    "UnknownParameter": Failure.CONFIG,
    "ValidationError": Failure.CONFIG,
    "IdempotentParameterMismatch": Failure.CONFIG,  # one token, two different requests
    "UnsupportedOperation": Failure.CONFIG,
    # the credentials or their permissions: disable the cloud
    "AuthFailure": Failure.AUTH,
    "UnauthorizedOperation": Failure.AUTH,
    "AccessDenied": Failure.AUTH,
    "AccessDeniedException": Failure.AUTH,
    "ExpiredToken": Failure.AUTH,
    "ExpiredTokenException": Failure.AUTH,
    "RequestExpired": Failure.AUTH,  # the clock is off by more than 5 minutes
    "InvalidClientTokenId": Failure.AUTH,
    "SignatureDoesNotMatch": Failure.AUTH,
    "UnrecognizedClientException": Failure.AUTH,
    "MissingAuthenticationToken": Failure.AUTH,
    "Blocked": Failure.AUTH,  # the account is blocked
    # the API's rate: back off, retry the same place
    "RequestLimitExceeded": Failure.THROTTLE,
    "Throttling": Failure.THROTTLE,
    "ThrottlingException": Failure.THROTTLE,
    "RequestThrottled": Failure.THROTTLE,
    "TooManyRequestsException": Failure.THROTTLE,
    "ServiceUnavailable": Failure.THROTTLE,
    "Unavailable": Failure.THROTTLE,
    "InternalError": Failure.UNKNOWN,
    "InternalFailure": Failure.UNKNOWN,
}
_CONFIG_PREFIX = "Invalid"  # InvalidAMIID.NotFound, InvalidUserData.Malformed, ...


def classify(code: str) -> Failure:
    """The failure class of an EC2 (or STS) error code."""
    if code in _CODES:
        return _CODES[code]
    if code.startswith(_CONFIG_PREFIX):
        return Failure.CONFIG
    return Failure.UNKNOWN


# EC2's vCPU quotas by instance class: (letters the family starts with, the class's name)
_CLASSES = (("inf", "Inf"), ("trn", "Trn"), ("dl", "DL"), ("vt", "G and VT"), ("hpc", "HPC"),
            ("g", "G and VT"), ("p", "P"), ("f", "F"), ("x", "X"), ("u", "High Memory"))
_STANDARD = "Standard (A, C, D, H, I, M, R, T, Z)"


def instance_class(instance_type: str) -> str:
    """The class of EC2's vCPU quotas an instance type counts against (``P`` for p4d)."""
    letters = re.match(r"[a-z]*", instance_type.lower())
    prefix = letters.group(0) if letters else ""
    for start, name in _CLASSES:
        if prefix.startswith(start):
            return name
    return _STANDARD


def quota(code: str, instance_type: str, spot: bool) -> str | None:
    """The quota a quota error is about, by the name the Service Quotas console gives it
    (the region is the launch's); None for any other error."""
    if classify(code) is not Failure.QUOTA:
        return None
    name = instance_class(instance_type)
    if spot:
        return f"EC2 'All {name} Spot Instance Requests' (vCPUs)"
    return f"EC2 'Running On-Demand {name} instances' (vCPUs)"


def _boto_core(error: BotoCoreError) -> tuple[Failure, str, str]:
    code = type(error).__name__
    if isinstance(error, NoCredentialsError | PartialCredentialsError):
        return Failure.AUTH, code, NO_CREDENTIALS
    if isinstance(error, ConnectionError | HTTPClientError):
        return Failure.THROTTLE, code, str(error)
    if isinstance(error, NoRegionError | ParamValidationError):
        return Failure.CONFIG, code, str(error)
    return Failure.UNKNOWN, code, str(error)


def cloud_error(error: ClientError | BotoCoreError, *, where: str = "",
                instance_type: str = "", spot: bool = False) -> CloudError:
    """A botocore error as the seam's :class:`CloudError` (the cloud's code and message)."""
    if isinstance(error, ClientError):
        body = error.response.get("Error", {})
        code = str(body.get("Code") or "Unknown")
        message = str(body.get("Message") or error)
        return CloudError(classify(code), code, message, where=where,
                          quota=quota(code, instance_type, spot) if instance_type else None)
    failure, code, message = _boto_core(error)
    return CloudError(failure, code, message, where=where)
