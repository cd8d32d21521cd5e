;; agent-shell (Emacs): one more agent in `agent-shell-agent-configs'; M-x agent-shell offers it.
(add-to-list 'agent-shell-agent-configs
             (agent-shell-make-agent-config
              :identifier 'echo-agent
              :mode-line-name "Echo"
              :buffer-name "Echo Agent"
              :shell-prompt "Echo> "
              :shell-prompt-regexp "Echo> "
              :client-maker (lambda (buffer)
                              (acp-make-client
                               :command "/home/me/project/.venv/bin/python"
                               :command-params '("/home/me/project/docs_src/first_agent.py")
                               :context-buffer buffer))))
