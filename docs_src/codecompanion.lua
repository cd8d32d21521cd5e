-- CodeCompanion (Neovim): an ACP adapter built on a built-in one, with this agent's command.
require("codecompanion").setup({
  adapters = {
    acp = {
      echo_agent = function()
        return require("codecompanion.adapters").extend("gemini_cli", {
          name = "echo_agent",
          formatted_name = "Echo Agent",
          commands = {
            default = { "/home/me/project/.venv/bin/python", "/home/me/project/docs_src/first_agent.py" },
          },
          defaults = { auth_method = nil, mcpServers = {} },
          env = {},
        })
      end,
    },
  },
  interactions = { chat = { adapter = "echo_agent" } },
})
