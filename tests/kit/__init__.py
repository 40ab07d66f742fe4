"""The test kit every test folder shares, imported as `kit` (setup.cfg: `pythonpath = tests`; no test edits
sys.path): one fake clock (`kit.clock`), the mock of Anthropic's Messages API with the real claude CLI and the
fake claude (`kit.claude`, `kit.mock_messages_api`, `kit.fake_claude`), and one todo sink (`kit.sink`)."""
