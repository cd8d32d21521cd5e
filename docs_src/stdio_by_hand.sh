# One request at a time: wait for each answer (here: sleep 1) before the next request.
(
  echo '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2,"info":{"name":"me","version":"0"}}}'
  sleep 1
  echo '{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp"}}'
  sleep 1
  echo '{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}'
  sleep 1
) | python my_agent.py
