-- wrk script for `make bench-scale`: every request is user0's, with a registration id drawn
-- from the first $SCALE_IDS of the benchmark store (midtier-bench's numbered ids), uniformly or
-- ($SCALE_SKEW=1) nine calls in ten to the first tenth.
local count = tonumber(os.getenv("SCALE_IDS"))
local skewed = os.getenv("SCALE_SKEW") == "1"
local path = os.getenv("SCALE_PATH")
local auth = os.getenv("SCALE_AUTH")

init = function(args)
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16) % 100000)
end

request = function()
  local n
  if skewed and math.random() < 0.9 then n = math.random(math.max(1, math.floor(count / 10))) - 1 else n = math.random(count) - 1 end
  local id = string.format("%08x-0000-4000-8000-%012x", n, n)
  return wrk.format("GET", path, { ["Authorization"] = auth, ["X-SMP-APPCID"] = id })
end
