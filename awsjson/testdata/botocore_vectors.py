"""Writes botocore_vectors.json: requests signed by botocore's SigV4 signer
(header and query auth) with User-Agent and X-Amzn-Trace-Id signed, as AWS
SDK for Java v1 signs User-Agent: botocore leaves them out by default
(SIGNED_HEADERS_BLACKLIST), so the list keeps only Expect here. Each is
signed at the time it is written (botocore reads the clock).

    python3 awsjson/testdata/botocore_vectors.py > awsjson/testdata/botocore_vectors.json
"""
import datetime
import json
from unittest import mock

import botocore
import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

def vector(name, method, url, headers, body, secret, token=None, region="us-east-1", service="ecs", presign=False):
    creds = Credentials("AKIDBOTO", secret, token)
    req = AWSRequest(method=method, url=url, headers=dict(headers), data=body)
    with mock.patch.object(botocore.auth, "SIGNED_HEADERS_BLACKLIST", ["expect"]):
        if presign:
            signer = botocore.auth.SigV4QueryAuth(creds, service, region, expires=300)
        else:
            signer = botocore.auth.SigV4Auth(creds, service, region)
        seen = []
        canonical_request = signer.canonical_request
        signer.canonical_request = lambda r: seen.append(canonical_request(r)) or seen[-1]
        signer.add_auth(req)
        canonical = seen[-1]
    prepared = req.prepare()
    amz_date = signer._timestamp if hasattr(signer, "_timestamp") else req.context["timestamp"]
    return {
        "Name": name,
        "Method": method,
        "URL": prepared.url,
        "Headers": [[k, v if isinstance(v, str) else v.decode()] for k, v in prepared.headers.items()],
        "Body": body,
        "Secret": secret,
        "Token": token or "",
        "Time": datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%dT%H:%M:%SZ"),
        "Canonical": canonical,
    }


ua = "aws-sdk-java/1.12.700 Linux/6.1 OpenJDK_64-Bit_Server_VM/17.0.9+9 java/17.0.9 vendor/Eclipse_Adoptium cfg/retry-mode/legacy"
json_headers = {
    "Content-Type": "application/x-amz-json-1.1",
    "X-Amz-Target": "AmazonEC2ContainerServiceV20141113.DescribeClusters",
    "User-Agent": ua,
    "X-Amzn-Trace-Id": "Root=1-67891233-abcdef012345678912345678",
    "amz-sdk-invocation-id": "b3c3e3f0-0000-4000-8000-000000000001",
}
vectors = [
    vector("ECS DescribeClusters, User-Agent signed", "POST", "http://127.0.0.1:8080/",
           json_headers, '{"clusters":["default"]}', "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
    vector("Cloud Map with a session token", "POST", "https://servicediscovery.eu-west-1.amazonaws.com/",
           dict(json_headers, **{"X-Amz-Target": "Route53AutoNaming_v20170314.ListNamespaces", "User-Agent": "  spaced   out  agent "}),
           "{}", "secret-b", token="token-b", region="eu-west-1", service="servicediscovery"),
    vector("Service Quotas, payload hash declared", "POST", "http://localhost:4566/",
           dict(json_headers, **{"X-Amz-Target": "ServiceQuotasV20190624.ListServices",
                                 "X-Amz-Content-SHA256": "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}),
           "{}", "s3cr3t", service="servicequotas"),
    vector("presigned GET with a query", "GET", "http://127.0.0.1:8080/a%20b/?Action=List&b=2&a=x%2Fy",
           {"User-Agent": ua}, "", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", presign=True),
]
print(json.dumps(vectors, indent=1))
