"""node/tool"""
