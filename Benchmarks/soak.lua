-- wrk script for `make soak`: each request is a different user's call (credentials and
-- registration id from $SOAK_USERS, one "base64(user:password) registration-id" per line),
-- and every connection waits $SOAK_DELAY_MS (fractional: wrk takes whole milliseconds, so the
-- fraction is a chance of one more) between requests; that sets the rate.
local entries = {}
for line in io.lines(os.getenv("SOAK_USERS")) do
  local credentials, id = line:match("(%S+) (%S+)")
  if credentials then entries[#entries + 1] = { credentials, id } end
end
local path = os.getenv("SOAK_PATH")
local pause = tonumber(os.getenv("SOAK_DELAY_MS") or "0")
local n = math.random(#entries)

request = function()
  n = n % #entries + 1
  local entry = entries[n]
  return wrk.format("GET", path, { ["Authorization"] = "Basic " .. entry[1], ["X-SMP-APPCID"] = entry[2] })
end

local whole = math.floor(pause)
local fraction = pause - whole
delay = function()
  if math.random() < fraction then return whole + 1 end
  return whole
end
