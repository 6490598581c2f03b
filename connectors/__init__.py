"""skillstream.connectors"""
