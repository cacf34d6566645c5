#!/usr/bin/env python3
"""A real OData v2 client (pyodata, from PyPI) reads SuccessFactors payroll through the real
`midtier` binary: `$metadata` (patched with Precision/Scale), a paged collection followed by
`__next` to the end, and navigation — without ever contacting the back end directly.

Usage: pyodata_client.py PATH-TO-MIDTIER. Prints `pyodata: N passed, M failed`.
"""
import json, os, shutil, socket, subprocess, sys, tempfile, time
from decimal import Decimal
from urllib.parse import urlparse

import pyodata
import requests
from harness import Checks, free_port, wait_for, demo_config, sandbox_command

BIN = os.path.abspath(sys.argv[1])
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
processes = []


check = Checks("pyodata")


work = tempfile.mkdtemp(prefix="midtier-pyodata-")
try:
    mport, aport, sport = free_port(), free_port(), free_port()
    config = demo_config(REPO, work, mport, aport)
    destination_file = os.path.join(config, "destinations", "sf.json")
    destination = json.load(open(destination_file))
    destination["URL"] = f"http://127.0.0.1:{sport}"
    destination["tokenServiceURL"] = f"http://127.0.0.1:{sport}/oauth/token"
    destination["metadataPatches"] = [{"entityType": "EmployeePayrollRunResultsItems", "property": "amount",
                                       "set": {"Precision": "15", "Scale": "2"}}]
    json.dump(destination, open(destination_file, "w"))

    processes.append(subprocess.Popen(sandbox_command(BIN) + ["--port", str(sport), "--page-size", "5"], cwd=REPO,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    processes.append(subprocess.Popen([BIN, "serve", "--config", config], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    base = f"http://localhost:{mport}"
    check("sandbox and midtier start", wait_for(f"http://127.0.0.1:{sport}/sandbox/stats") and wait_for(base + "/healthz"))

    registration = requests.post(base + "/odata/applications/v1/demo/Connections", json={"DeviceType": "Android"},
                                 auth=("alice", "alice-demo-password"), timeout=10)
    appcid = registration.headers["X-SMP-APPCID"]

    session = requests.Session()
    session.auth = ("alice", "alice-demo-password")
    session.headers["X-SMP-APPCID"] = appcid
    contacted = []
    session.hooks["response"].append(lambda response, *args, **kwargs: contacted.append(response.url))

    client = pyodata.Client(base + "/sf/odata/v2/", session)
    items_type = client.schema.entity_type("EmployeePayrollRunResultsItems")
    amount = items_type.proprty("amount")
    check("$metadata through Midtier carries Scale=2 and Precision=15 on amount",
          amount.scale == 2 and amount.precision == 15, f"(scale {amount.scale}, precision {amount.precision})")

    runs = []
    pages = 0
    request = client.entity_sets.EmployeePayrollRunResults.get_entities().expand("employeePayrollRunResultsItems")
    batch = request.execute()
    while True:
        pages += 1
        runs.extend(batch)
        if not batch.next_url or pages > 20:
            break
        check(f"__next of page {pages} points at Midtier", batch.next_url.startswith(base + "/sf/odata/v2/"), batch.next_url)
        batch = client.entity_sets.EmployeePayrollRunResults.get_entities().next_url(batch.next_url).execute()
    check("pyodata followed __next to the end (24 runs over several pages)", len(runs) == 24 and pages >= 5, f"({len(runs)} runs, {pages} pages)")
    check("every run is alice's", all(run.userId == "100001" for run in runs))
    amounts = [item.amount for run in runs for item in run.employeePayrollRunResultsItems]
    # pyodata hands Edm.Decimal values over as the strings SuccessFactors sends; each must fit
    # the patched facets (two places).
    check("amounts are decimals with the two places Scale declares", amounts and all(Decimal(str(a)).as_tuple().exponent == -2 for a in amounts),
          str(amounts[:3]))

    user = client.entity_sets.User.get_entity("100001").execute()
    check("a single entity reads through Midtier", user.userId == "100001")
    # check-config against a saved $metadata: a patch with a typo is reported with its key.
    saved = os.path.join(work, "metadata.xml")
    open(saved, "wb").write(session.get(base + "/sf/odata/v2/$metadata", timeout=10).content)
    typo = json.load(open(destination_file))
    typo["metadataPatches"].append({"entityType": "EmployeePayrollRunResultsItems", "property": "amuont", "set": {"Precision": "15", "Scale": "2"}})
    json.dump(typo, open(destination_file, "w"))
    result = subprocess.run([BIN, "check-config", "--config", config, "--metadata", f"sf={saved}"], cwd=REPO, capture_output=True, text=True)
    check("check-config --metadata reports a patch that matches nothing",
          result.returncode != 0 and "sf.json: metadataPatches[1]: matches no property amuont" in result.stdout, result.stdout)
    typo["metadataPatches"].pop()
    json.dump(typo, open(destination_file, "w"))
    result = subprocess.run([BIN, "check-config", "--config", config, "--metadata", f"sf={saved}"], cwd=REPO, capture_output=True, text=True)
    check("check-config --metadata accepts patches that all match", result.returncode == 0, result.stdout)
    hosts = {urlparse(url).netloc for url in contacted}
    check("pyodata never contacted the back end directly", hosts == {f"localhost:{mport}"}, str(hosts))
finally:
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    shutil.rmtree(work, ignore_errors=True)

print()
check.finish()
