-- wrk script: chat turns on armature serve's OpenHarness endpoint. Each
-- request is a new turn (a fresh request_id) on one of SESSIONS sessions
-- per wrk thread, round robin, so -t2 spreads turns over 2 x SESSIONS
-- sessions; sessions that receive concurrent turns serialize them.
--   wrk -t2 -c100 -d15s --latency -s bench/load/openharness.lua http://127.0.0.1:8080
local SESSIONS = 50
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
end

function init(args)
  n = 0
  stamp = os.time()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  n = n + 1
  local session = string.format("wrk-%d-%d-%d", stamp, tid, n % SESSIONS)
  local body = string.format(
    '{"protocol_version":"1.0.0","request_id":"%s-%d","request":{"context":{"session_id":"%s","user_intent":"hello number %d"}}}',
    session, n, session, n)
  return wrk.format(nil, "/v1/openharness", nil, body)
end
