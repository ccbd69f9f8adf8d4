"""Moving in: conversations read from another library's store, written to a log.

Example (shell):
    chatledger import --from spring-ai-jdbc postgresql+psycopg://app@db/app sqlite:///chat.db
    chatledger import --from langchain-sql sqlite:///langchain.db sqlite:///chat.db
    chatledger import --from llama-index-simple chat_store.json sqlite:///chat.db

:mod:`~chatledger.move_in.formats` names the stores; each family's reader
has a module of its own (:mod:`~chatledger.move_in.spring_ai`,
:mod:`~chatledger.move_in.langchain`, :mod:`~chatledger.move_in.openai_agents`,
:mod:`~chatledger.move_in.llama_index`), table sources read through
:mod:`~chatledger.move_in.tables` (SQLAlchemy, which chatledger-sql brings).
A reader hands over one :class:`~chatledger.move_in.conversation.SourceConversation`
at a time, with every row it cannot carry said; :func:`~chatledger.move_in.landing.land`
writes it with one log append, whole or not at all.

The readers live in core, beside the command, and depend on nothing of the
adapters: a source table is read with SQLAlchemy alone, whatever the target.
The LangChain and LlamaIndex formats convert through their bridges, imported
only when asked for, so a moved-in conversation reads back through the
bridge as the framework kept it; the bridges know nothing of moving in.
"""
