"""The control plane: one module per concern (models, registrations, engines, envs, engine_schemas, cache, logs,
cluster, operations, chat_templates, ui), each with its shapes, its service and its routes; every route only calls
its module's service."""
